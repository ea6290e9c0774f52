"""A reservation's estimate and an elastic gang that gives back only some members (issue
38): the members leaving count as released now, the members that stay at the gang's end. It
once counted the whole gang as released now, so a gang reserved behind a shrink was told it
started at once, on nodes the gang's remaining members keep.

Four 8-GPU nodes; queue ``q`` (quota 32 GPUs, default runtime 3600 s); gang ``w`` of three
8-GPU pods (priority 0, reservations on) waits for room."""

from __future__ import annotations

from dataclasses import replace

from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.model.workloads import EXPECTED_RUNTIME_ANNOTATION, PodInfo
from scheduler.world.snapshot import Snapshot
from tests.unit.elastic.helpers import NODES, NOW, grouped, job_pods
from tests.unit.policies.builders import SOLVE, policies, queue

N0, N1, N2, N3 = (n.name for n in NODES)
STARTED = NOW - 100.0
E_ENDS = STARTED + 3600.0


def _running(pods: list[PodInfo], leaving: tuple[str, ...] = (),
             runtime: str | None = None) -> list[PodInfo]:
    notes = {EXPECTED_RUNTIME_ANNOTATION: runtime} if runtime else {}
    return [replace(p, started_at=STARTED, terminating=p.name in leaving,
                    annotations={**p.annotations, **notes}) for p in pods]


def _plan(pods: list[PodInfo], parallelism: dict[str, int]) -> CyclePlan:
    gangs = grouped(pods, parallelism)
    return decide(Snapshot(NODES, gangs.running), gangs.pending,
                  policies(queue("q", quota={"a100": 32}, runtime=3600.0)), NOW, solver=SOLVE)


def test_a_shrink_under_way_frees_its_leaving_members_now_and_the_rest_at_its_end() -> None:
    e = _running(job_pods("e", [N0, N1, N2, N3], min_member="2"), leaving=("e-2", "e-3"))
    plan = _plan([*e, *job_pods("w", [None] * 3)], {"e": 4, "w": 3})
    reason = plan.pending["ns/w"]
    assert reason.category is ReasonCategory.RESERVED, reason
    assert reason.estimated_start == E_ENDS


def test_the_leaving_members_count_now_with_what_ends_sooner() -> None:
    """``o`` ends in 600 s: with e's two leaving members, that is room for w then, on
    nodes e's remaining member does not keep."""
    e = _running(job_pods("e", [N0, N1, N2], min_member="1"), leaving=("e-1", "e-2"))
    o = _running(job_pods("o", [N3]), runtime="700")
    plan = _plan([*e, *o, *job_pods("w", [None] * 3)], {"e": 3, "o": 1, "w": 3})
    reason = plan.pending["ns/w"]
    assert reason.category is ReasonCategory.RESERVED, reason
    assert reason.estimated_start == STARTED + 700.0
    (reservation,) = plan.reservations
    assert reservation.nodes == (N1, N2, N3)


def test_members_a_preemptor_shrinks_this_cycle_do_not_free_the_rest_of_the_gang() -> None:
    """x (priority 9) takes e-3, the member above e's minimum it needs; w, reserved later
    in the same cycle, waits for e's end, not for nothing."""
    e = _running(job_pods("e", [N0, N1, N2, N3], min_member="2"))
    pending = [*job_pods("x", [None], priority=9), *job_pods("w", [None] * 3)]
    plan = _plan([*e, *pending], {"e": 4, "x": 1, "w": 3})
    (ev,) = plan.evictions
    assert [p.name for p in ev.pods] == ["e-3"]
    reason = plan.pending["ns/w"]
    assert reason.category is ReasonCategory.RESERVED, reason
    assert reason.estimated_start == E_ENDS
