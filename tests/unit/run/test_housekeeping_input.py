"""``HousekeepingInput.of``: what ``decide`` is told besides the pending gangs, gathered from
the cycle's input, the backoffs and the cache's pods, table-driven; and the one thing it
keeps between cycles, since when a gang has been partly bound (its timeout runs from then)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from scheduler.decide.housekeeping import (
    FailedBind,
    FormationProblem,
    Housekeeping,
    PartlyBound,
)
from scheduler.feed.cache import ClusterCache
from scheduler.model import Node, PodRef, PodRequirements, Resources
from scheduler.model.workloads import (
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    PodGroupInfo,
    PodInfo,
    PodPhase,
)
from scheduler.run.backoff import Backoffs
from scheduler.run.housekeeping_input import HousekeepingInput

GRACE = 45.0
NOW = 1000.0


def pod(name: str, gang: str = "p", *, node: str = "", phase: PodPhase | None = None,
        created: float = 0.0, started: float | None = None, size: int = 2,
        gates: tuple[str, ...] = ()) -> PodInfo:
    """A member of gang ``ns/<gang>`` of *size* members; bound on *node* if given (Running
    unless *phase* says otherwise)."""
    return PodInfo(uid=f"u-{name}", namespace="ns", name=name,
                   requirements=PodRequirements(Resources.of(gpu=1)),
                   scheduler_name="gang-scheduler", node_name=node,
                   phase=phase or (PodPhase.RUNNING if node else PodPhase.PENDING),
                   creation_time=created, started_at=started, scheduling_gates=gates,
                   labels={POD_GROUP_LABEL: gang, QUEUE_LABEL: "team"},
                   annotations={"gangscheduler.io/min-member": str(size)})


def ref(p: PodInfo) -> PodRef:
    return PodRef(p.namespace, p.name, p.uid)


#: Gang p, one of two members bound (started at 10, the other created at 5: cut mid-bind).
BOUND = pod("p-0", node="n1", created=5.0, started=10.0)
WAITING = pod("p-1", created=5.0)


@dataclass
class Case:
    name: str
    pods: list[PodInfo]
    expected: Housekeeping
    groups: list[PodGroupInfo] = field(default_factory=list)
    failed: dict[str, tuple[float, str, bool]] = field(default_factory=dict)  # at, why, held
    takeover: bool = False


CASES = [
    Case("a complete pending gang: nothing to tell", [pod("p-0"), pod("p-1")], Housekeeping()),
    Case("a takeover is told even with nothing else", [pod("p-0"), pod("p-1")],
         Housekeeping(takeover=True, repair_grace=GRACE), takeover=True),
    Case("a gang backing off until its delay ends, with why its bind failed",
         [pod("p-0"), pod("p-1")],
         Housekeeping({"ns/p": NOW + 5}, repair_grace=GRACE,
                      failed_binds={"ns/p": FailedBind("refused", False, 5.0)}),
         failed={"ns/p": (NOW, "refused", False)}),
    Case("a bind that failed for want of an answer holds its gang (transient)",
         [pod("p-0"), pod("p-1")],
         Housekeeping({"ns/p": NOW + 5}, repair_grace=GRACE,
                      failed_binds={"ns/p": FailedBind("503", True, 5.0)}),
         failed={"ns/p": (NOW, "503", True)}),
    Case("a backoff over by now is not told", [pod("p-0"), pod("p-1")],
         Housekeeping(repair_grace=GRACE), failed={"ns/p": (NOW - 5, "refused", False)}),
    Case("pods that cannot be a gang: the problem and the pods not bound (the bound one "
         "makes it partly bound too)",
         [pod("p-0", gates=("wait",)), pod("p-1", node="n1")],
         Housekeeping(unformed={"ns/p": FormationProblem(
             "pod p-0 has scheduling gates (wait): the gang is considered once they are "
             "removed", (PodRef("ns", "p-0", "u-p-0"),))},
             partly_bound={"ns/p": PartlyBound((PodRef("ns", "p-1", "u-p-1"),), True, NOW)},
             repair_grace=GRACE)),
    Case("partly bound, cut while binding, started", [BOUND, WAITING],
         Housekeeping(partly_bound={"ns/p": PartlyBound((ref(BOUND),), True, NOW, True)},
                      repair_grace=GRACE)),
    Case("partly bound, its bound member not started (Pending on its node)",
         [dataclasses.replace(BOUND, phase=PodPhase.PENDING), WAITING],
         Housekeeping(partly_bound={"ns/p": PartlyBound((ref(BOUND),), False, NOW, True)},
                      repair_grace=GRACE)),
    Case("partly bound by a replacement created after the start: not cut",
         [BOUND, dataclasses.replace(WAITING, creation_time=20.0)],
         Housekeeping(partly_bound={"ns/p": PartlyBound((ref(BOUND),), True, NOW, False)},
                      repair_grace=GRACE)),
    Case("partly bound with its PodGroup's timeout", [BOUND, WAITING],
         Housekeeping(partly_bound={"ns/p": PartlyBound((ref(BOUND),), True, NOW, True, 120)},
                      repair_grace=GRACE),
         groups=[PodGroupInfo("ns", "p", min_member=2, schedule_timeout_seconds=120)]),
]


def _cache(pods: Sequence[PodInfo], groups: Sequence[PodGroupInfo] = ()) -> ClusterCache:
    cache = ClusterCache()
    cache.upsert_node(Node.build("n1", Resources.of(gpu=8, pods=110)))
    for g in groups:
        cache.upsert_group(g)
    for p in pods:
        cache.upsert_pod(p)
    return cache


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_what_decide_is_told(case: Case) -> None:
    cache = _cache(case.pods, case.groups)
    backoffs = Backoffs(initial=5)
    for gid, (at, why, held) in case.failed.items():
        backoffs.fail(gid, at, why, transient=held)
    got = HousekeepingInput(cache, backoffs, GRACE).of(cache.cycle_input(NOW), NOW,
                                                       case.takeover)
    assert got == case.expected


def test_nothing_to_tell_is_one_shared_value() -> None:
    cache = _cache([pod("p-0"), pod("p-1")])
    house = HousekeepingInput(cache, Backoffs(), GRACE)
    first = house.of(cache.cycle_input(NOW), NOW, False)
    assert house.of(cache.cycle_input(NOW + 1), NOW + 1, False) is first


def test_partly_bound_since_the_first_cycle_that_saw_it_until_it_is_not() -> None:
    cache = _cache([BOUND, WAITING])
    house = HousekeepingInput(cache, Backoffs(), GRACE)

    def since(now: float) -> float | None:
        partly = house.of(cache.cycle_input(now), now, False).partly_bound.get("ns/p")
        return None if partly is None else partly.since

    assert since(100.0) == 100.0
    assert since(200.0) == 100.0  # its timeout runs from the first cycle, not this one
    cache.upsert_pod(dataclasses.replace(WAITING, node_name="n1", phase=PodPhase.RUNNING))
    assert since(300.0) is None  # whole: forgotten
    cache.delete_pod(WAITING.uid)
    cache.upsert_pod(dataclasses.replace(WAITING, uid="u-p-2", name="p-2"))
    assert since(400.0) == 400.0  # partly bound again: from now
