"""An absurd duration or time never reaches a timestamp: refused where it is read, and every
place a time is written or shown represents whatever slips past (issue 32, item 3).

The pilot's case: ``gangscheduler.io/expected-runtime: 99999999999999999999d`` on a running
gang made the estimated start of the gang behind it ~8.6e24 s: every status write for that gang
raised "timestamp out of range", uncounted, and ``explain`` crashed.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from structlog.testing import capture_logs

from policies.parsing import parse_queue
from policies.queues import PolicySet, PoolQuota, Queue, QueueSet
from scheduler.cli.explain import describe_estimate, explain_text
from scheduler.feed import grouping_terms
from scheduler.feed.cache import ClusterCache
from scheduler.kube.write.status import PodGroupPhase, PodGroupStatus
from scheduler.kube.write.writer import BackgroundWriter, Retry
from scheduler.model import Node, PodRequirements, Resources
from scheduler.model.durations import (
    MAX_DURATION_SECONDS,
    format_duration,
    format_time,
    parse_duration,
)
from scheduler.model.resources import GPU
from scheduler.model.workloads import (
    EXPECTED_RUNTIME_ANNOTATION,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    JobInfo,
    PodGroupInfo,
    PodInfo,
    PodPhase,
)

NOW = 1_790_000_000.0
ABSURD = "99999999999999999999d"


class Fixed:
    def __init__(self, policies: PolicySet) -> None:
        self.policies = policies

    def current(self) -> PolicySet:
        return self.policies


def cluster(runtime: str) -> tuple[ClusterCache, Fixed]:
    """One 8-GPU node allocated to a running gang that says it runs for *runtime*; a gang of the
    same size waits behind it (so its estimated start is the running gang's end)."""
    cache = ClusterCache()
    cache.upsert_node(Node.build("n0", Resources.of(gpu=8, cpu=64000, pods=110),
                                 labels={"gangscheduler.io/pool": "a100"}))
    for name, bound in (("running", True), ("waiting", False)):
        cache.upsert_group(PodGroupInfo(
            "ns", name, uid=f"pg-{name}", min_member=2, labels={QUEUE_LABEL: "q"},
            annotations={EXPECTED_RUNTIME_ANNOTATION: runtime} if bound else {}))
        for i in range(2):
            cache.upsert_pod(PodInfo(
                uid=f"{name}{i}", namespace="ns", name=f"{name}-{i}",
                requirements=PodRequirements(Resources.of(gpu=4)),
                scheduler_name="gang-scheduler", labels={POD_GROUP_LABEL: name},
                node_name="n0" if bound else "",
                phase=PodPhase.RUNNING if bound else PodPhase.PENDING,
                started_at=NOW - 60 if bound else None, creation_time=NOW - 100))
    queue = Queue(name="q", namespaces=("ns",), quotas=(PoolQuota(
        pool="a100", nominal=Resources({GPU: 16}), covered=frozenset({GPU})),))
    return cache, Fixed(PolicySet(QueueSet.of([queue])))


@pytest.mark.parametrize(("runtime", "says"), [
    ("2h", "starts       estimated 2026-09-21T16:12:20Z (in 1h59m)"),
    (ABSURD, "pending: Placement"),  # no estimate at all: refused, so none is made from it
    ("366d", "pending: Placement"),
    ("365d", "starts       estimated 2027-09-21T14:12:20Z (in 364d23h)"),
])
def test_explain_after_an_absurd_expected_runtime_neither_crashes_nor_shows_it(
        runtime: str, says: str) -> None:
    cache, policies = cluster(runtime)
    text, found = explain_text("ns/waiting", cache, policies, NOW)
    assert found and says in text, text
    assert "9999" not in text


@pytest.mark.parametrize("seconds", [8.64e24, float("inf"), float("nan"), -1e30, 1e300])
def test_every_place_a_time_is_written_or_shown_represents_any_value(seconds: float) -> None:
    """The last guard: a time no input bound let through still writes and shows."""
    status = PodGroupStatus(PodGroupPhase.PENDING, reason="Unschedulable",
                            estimated_start=seconds, estimate_time=NOW)
    written = status.to_json(transition_time=NOW)
    assert written["estimatedStart"] in ("9999-12-31T23:59:59Z", "1970-01-01T00:00:00Z")
    assert format_time(seconds) == written["estimatedStart"]
    assert describe_estimate(seconds, NOW, made=NOW).startswith("estimated ")
    assert format_duration(max(0.0, seconds - NOW)) in (">365d", "-", "0s")  # as the views ask


def test_a_duration_beyond_a_year_says_so_instead_of_the_number() -> None:
    assert format_duration(8.64e24) == format_duration(MAX_DURATION_SECONDS + 1) == ">365d"
    assert format_duration(MAX_DURATION_SECONDS) == "365d00h"


@pytest.mark.parametrize(("text", "seconds"), [
    ("365d", MAX_DURATION_SECONDS), ("52w", 52 * 604800.0), ("P365D", MAX_DURATION_SECONDS)])
def test_a_duration_up_to_a_year_is_read(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", [ABSURD, "366d", "53w", "P366D", "31536001", "1e999",
                                  "9" * 400 + "s"])
def test_a_duration_beyond_a_year_is_refused_naming_the_bound(text: str) -> None:
    with pytest.raises(ValueError, match=r"365d|not a duration"):
        parse_duration(text)


def test_a_job_deadline_beyond_a_year_is_no_estimate() -> None:
    for deadline, runtime in ((3600, 3600.0), (2**63 - 1, None), (31_536_001, None)):
        job = JobInfo("ns", "j", "u", active_deadline_seconds=deadline)
        assert grouping_terms.runtime([], job) == runtime


QUEUE = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"}}


@pytest.mark.parametrize("path", [("queueing", "defaultRuntimeSeconds"),
                                  ("queueing", "reserveAfterSeconds"),
                                  ("preemption", "minRuntimeSeconds")])
@pytest.mark.parametrize(("value", "refused"), [
    (1e300, True), (31_536_001, True), (31_536_000, False), (3600, False)])
def test_queue_durations_beyond_a_year_are_refused_naming_the_field(
        path: tuple[str, str], value: float, refused: bool) -> None:
    queue, errors = parse_queue({**QUEUE, "spec": {path[0]: {path[1]: value}}})
    assert [(e.path, e.reason) for e in errors] == (
        [(f"spec.{path[0]}.{path[1]}", f"must be at most 31536000 (365d), got {value!r}")]
        if refused else [])
    assert (queue is None) == refused


def test_a_status_write_that_raises_is_counted_each_time_and_logged_once() -> None:
    failed: list[int] = []
    lock = threading.Lock()

    def count() -> None:
        with lock:
            failed.append(1)

    writer = BackgroundWriter(retry=Retry(failed=count))

    def overflow() -> Any:
        raise OverflowError("timestamp out of range for platform time_t")

    with capture_logs() as logs:
        for _ in range(5):  # a pending gang's task, submitted again each cycle
            writer.submit("pending/ns/waiting", overflow)
            assert writer.flush()
        writer.submit("pending/ns/waiting", lambda: None)  # fixed: forgotten
        assert writer.flush()
        writer.submit("pending/ns/waiting", overflow)  # broken again: said again
        assert writer.flush()
    writer.stop()
    assert len(failed) == 6 and writer.kept == 0  # not retried: it would raise again
    warnings = [e for e in logs if e["event"] == "status_write_failed"
                and e["log_level"] == "warning"]
    assert [(w["key"], w["reason"]) for w in warnings] == [
        ("pending/ns/waiting", "OverflowError: timestamp out of range for platform time_t")] * 2
