"""Elastic shrink: a preemptor takes members above running gangs' minimum before anyone
loses a whole gang, as few as it needs, highest rank first, and the eviction names them.

Four 8-GPU nodes; queue ``q`` (withinQueue LowerPriority) with 32 GPUs of quota; the
preemptor ``x`` has priority 9."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan
from scheduler.model.workloads import PodInfo, PodPhase
from scheduler.world.snapshot import Snapshot
from tests.unit.elastic.helpers import NODES, NOW, grouped, job_pods
from tests.unit.policies.builders import SOLVE, policies, queue

N0, N1, N2, N3 = (n.name for n in NODES)


@dataclass(frozen=True)
class Case:
    name: str
    pods: list[PodInfo]
    parallelism: dict[str, int]
    #: victim gang -> the pods its eviction takes (None: the whole gang).
    evicted: dict[str, set[str] | None]


def _x(n: int) -> list[PodInfo]:
    return job_pods("x", [None] * n, priority=9)


CASES = [
    Case("members above the minimum go, highest rank first",
         [*job_pods("e", [N0, N1, N2, N3], min_member="2"), *_x(2)], {"e": 4, "x": 2},
         {"ns/e": {"e-2", "e-3"}}),
    Case("as few members as the preemptor needs",
         [*job_pods("e", [N0, N1, N2, N3], min_member="2"), *_x(1)], {"e": 4, "x": 1},
         {"ns/e": {"e-3"}}),
    Case("members above a minimum before a cheaper whole gang",
         [*job_pods("e", [N0, N1, N2], min_member="2"), *job_pods("o", [N3]), *_x(1)],
         {"e": 3, "o": 1, "x": 1}, {"ns/e": {"e-2"}}),
    Case("never below the minimum: whole gangs when the members above it do not suffice",
         [*job_pods("e", [N0, N1, N2, N3], min_member="3"), *_x(2)], {"e": 4, "x": 2},
         {"ns/e": None}),
    Case("a gang at its minimum is evicted whole as before",
         [*job_pods("e", [N0, N1, N2, N3], min_member="4"), *_x(1)], {"e": 4, "x": 1},
         {"ns/e": None}),
]


def _plan(pods: list[PodInfo], parallelism: dict[str, int]) -> CyclePlan:
    gangs = grouped(pods, parallelism)
    return decide(Snapshot(NODES, gangs.running), gangs.pending,
                  policies(queue("q", quota={"a100": 32})), NOW, solver=SOLVE)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_shrink(case: Case) -> None:
    plan = _plan(case.pods, case.parallelism)
    got = {e.victim: None if e.release.is_whole else {p.name for p in e.pods}
           for e in plan.evictions}
    assert got == case.evicted
    assert plan.nomination_of("ns/x") is not None


def test_the_eviction_names_the_members_that_go() -> None:
    plan = _plan([*job_pods("e", [N0, N1, N2, N3], min_member="2"), *_x(2)],
                 {"e": 4, "x": 2})
    (ev,) = plan.evictions
    assert ev.headline.startswith("preempted by gang ns/x: members e-2, e-3 above the "
                                  "gang's minimum 2 are released for ns/x (priority 9)")


def test_the_preemptor_binds_once_the_members_are_gone_though_the_gang_runs_on() -> None:
    pods = [*job_pods("e", [N0, N1, N2, N3], min_member="2"), *_x(2)]
    first = _plan(pods, {"e": 4, "x": 2})
    pol = policies(queue("q", quota={"a100": 32}))
    # The released members are deleted; the Job recreates them (pending, new uids).
    after = [p for p in pods if p.name not in {"e-2", "e-3"}]
    again = [replace(p, uid=f"new-{p.name}", node_name="", phase=PodPhase.PENDING,
                     started_at=None)
             for p in pods if p.name in {"e-2", "e-3"}]
    gangs = grouped([*after, *again], {"e": 4, "x": 2})
    plan = decide(Snapshot(NODES, gangs.running), gangs.pending, pol, NOW + 30, first,
                  solver=SOLVE)
    (bind,) = plan.binds
    assert bind.gang_id == "ns/x" and not plan.evictions
    assert plan.pending["ns/e"].message.startswith("growing: 0 of 2 optional members placed")


def test_a_gang_waits_for_the_members_an_elastic_gang_is_giving_back_not_for_all_of_it() -> None:
    # e-2 and e-3 are being deleted (a shrink under way, decided by an earlier leader); z
    # waits for their nodes, not for e's minimum, which runs on.
    pods = [*(replace(p, terminating=p.name in {"e-2", "e-3"})
              for p in job_pods("e", [N0, N1, N2, N3], min_member="2")),
            *job_pods("z", [None])]
    first = _plan(pods, {"e": 4, "z": 1})
    nomination = first.nomination_of("ns/z")
    assert nomination is not None and not first.evictions
    assert set(nomination.nodes) <= {N2, N3}
    after = [p for p in pods if p.name not in {"e-2", "e-3"}]
    gangs = grouped(after, {"e": 4, "z": 1})
    plan = decide(Snapshot(NODES, gangs.running), gangs.pending,
                  policies(queue("q", quota={"a100": 32})), NOW + 30, first, solver=SOLVE)
    assert [b.gang_id for b in plan.binds] == ["ns/z"]
