"""The estimated start on a pending gang's pods (``gangscheduler.io/estimated-start`` and
``-time``): every gang's pods carry it, whatever owns them, and it is written only when the
estimate moves beyond ``same_estimate``'s slack, so a gang whose estimate drifts every cycle
costs a bounded number of writes."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.decide.plan import CyclePlan, PendingReason, ReasonCategory
from scheduler.kube.client import Response
from scheduler.kube.write.owner_estimates import OwnerEstimates
from scheduler.kube.write.status import ESTIMATE_SLACK_SECONDS, StatusWriter
from scheduler.kube.write.writer import BackgroundWriter
from scheduler.model import PodRef
from scheduler.model.durations import format_time
from scheduler.model.pods import PodRequirements
from scheduler.model.resources import Resources
from scheduler.model.workloads import (
    ESTIMATE_TIME_ANNOTATION,
    ESTIMATED_START_ANNOTATION,
    OwnerRef,
    PodInfo,
)

NOW = 1_800_000_000.0
POD = PodRef("team-a", "train-0", "uid-0")


class Api:
    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        assert method == "PATCH"
        self.patches.append((path, body))
        return Response(self.status, b"{}")


def annotations_of(body: dict[str, Any]) -> dict[str, Any]:
    return dict(body["metadata"]["annotations"])


def test_an_estimate_drifting_every_cycle_is_written_once_per_material_move() -> None:
    """A gang whose blockers overrun: its estimate moves 1 s later every cycle for an hour.
    Written when first known and then once per slack's worth of drift, not 3600 times."""
    api = Api()
    writer = StatusWriter(api)  # type: ignore[arg-type]
    start = NOW + 60.0  # close: the slack is the 60 s floor, not a tenth of the wait
    writes = sum(writer.set_estimate(POD, start + s, NOW + s) for s in range(3600))
    assert writes == len(api.patches)
    # 3600 s of drift at most one write per 60 s moved (plus the first).
    assert writes <= 3600 / ESTIMATE_SLACK_SECONDS + 1
    assert writes >= 3600 / (2 * ESTIMATE_SLACK_SECONDS)  # and it does follow the estimate
    path, body = api.patches[0]
    assert path == "/api/v1/namespaces/team-a/pods/train-0"  # metadata, not /status
    assert body["metadata"]["uid"] == "uid-0"  # a recreated namesake rejects it
    assert annotations_of(body) == {ESTIMATED_START_ANNOTATION: format_time(start),
                                 ESTIMATE_TIME_ANNOTATION: format_time(NOW)}


@pytest.mark.parametrize(("moves", "expected"), [
    pytest.param([NOW + 600, NOW + 630], 1, id="within the slack: not written again"),
    pytest.param([NOW + 600, NOW + 900], 2, id="moved 5 min: written"),
    pytest.param([NOW + 6000, NOW + 6500], 1, id="a tenth of a long wait is the slack"),
    pytest.param([NOW + 600, None], 2, id="no estimate any more: removed"),
    pytest.param([None, None], 0, id="never estimated: nothing to remove"),
    pytest.param([NOW + 600, None, None], 2, id="removed once"),
])
def test_what_is_written(moves: list[float | None], expected: int) -> None:
    api = Api()
    writer = StatusWriter(api)  # type: ignore[arg-type]
    for start in moves:
        writer.set_estimate(POD, start, NOW)
    assert len(api.patches) == expected
    if moves[-1] is None and expected:
        assert annotations_of(api.patches[-1][1]) == {ESTIMATED_START_ANNOTATION: None,
                                                   ESTIMATE_TIME_ANNOTATION: None}


def test_a_failed_write_is_retried_and_a_bound_pod_starts_fresh() -> None:
    api = Api(status=500)
    writer = StatusWriter(api)  # type: ignore[arg-type]
    assert not writer.set_estimate(POD, NOW + 600, NOW)
    api.status = 200
    assert writer.set_estimate(POD, NOW + 600, NOW)  # not cached while failing
    assert not writer.set_estimate(POD, NOW + 600, NOW)
    writer.forget_pod(POD.uid)  # bound (or deleted): a later pending spell writes again
    assert writer.set_estimate(POD, NOW + 600, NOW)
    assert len(api.patches) == 3


# The owning Job -----------------------------------------------------------------------------
JOB = OwnerRef("Job", "train", "job-uid")


def pod_of(owner: OwnerRef | None, i: int = 0) -> PodInfo:
    return PodInfo(f"uid-{i}", "team-a", f"train-{i}",
                   PodRequirements(Resources.of(gpu=8)), owner=owner)


def plan_with(estimates: dict[str, float | None], now: float) -> CyclePlan:
    return CyclePlan(now=now, pending={
        gid: PendingReason(ReasonCategory.RESERVED if start else ReasonCategory.QUOTA, "x", 1,
                           start) for gid, start in estimates.items()})


def job_patches(api: Api) -> list[dict[str, Any]]:
    return [annotations_of(body) for path, body in api.patches if "/jobs/" in path]


def test_the_owning_job_follows_the_estimate_and_loses_it_when_the_gang_starts() -> None:
    api = Api()
    statuses = StatusWriter(api)  # type: ignore[arg-type]
    writer = BackgroundWriter()
    pods = {"team-a/train": [pod_of(JOB, 0), pod_of(JOB, 1)],
            "team-a/lone": [pod_of(None)],
            "team-a/mixed": [pod_of(JOB), pod_of(OwnerRef("Job", "other", "u2"))]}
    owners = OwnerEstimates(statuses, writer, lambda gid: pods.get(gid, []))
    try:
        for second in range(30):  # drifting by a second a cycle: one write
            owners.publish(plan_with({"team-a/train": NOW + 600 + second,
                                      "team-a/lone": NOW + 600, "team-a/mixed": NOW + 600},
                                     NOW + second))
            assert writer.flush()
        assert job_patches(api) == [{ESTIMATED_START_ANNOTATION: format_time(NOW + 600),
                                     ESTIMATE_TIME_ANNOTATION: format_time(NOW)}]
        assert api.patches[0][0] == "/apis/batch/v1/namespaces/team-a/jobs/train"
        assert api.patches[0][1]["metadata"]["uid"] == "job-uid"
        owners.publish(plan_with({"team-a/train": NOW + 1800}, NOW + 30))  # moved: written
        assert writer.flush()
        owners.publish(plan_with({}, NOW + 40))  # started: removed, once
        assert writer.flush()
        owners.publish(plan_with({}, NOW + 50))
        assert writer.flush()
    finally:
        writer.stop()
    moved, removed = job_patches(api)[1:]
    assert moved[ESTIMATED_START_ANNOTATION] == format_time(NOW + 1800)
    assert removed == {ESTIMATED_START_ANNOTATION: None, ESTIMATE_TIME_ANNOTATION: None}
    assert len(api.patches) == 3  # no Job for a lone pod, nor for pods of two Jobs
