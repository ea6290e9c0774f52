"""Elastic gangs start at what fits (down to their minimum) and grow into room that appears,
within quota, never displacing anyone: scenarios of a Job's pods in, binds and reasons out.

Four 8-GPU nodes; queue ``q`` with 32 GPUs of quota unless a case says otherwise."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduler.decide.cycle import decide
from scheduler.decide.plan import ReasonCategory
from scheduler.model.workloads import PodInfo
from scheduler.world.snapshot import Snapshot
from tests.unit.elastic.helpers import NODES, NOW, grouped, job_pods
from tests.unit.policies.builders import SOLVE, policies, queue

N0, N1, N2, N3 = (n.name for n in NODES)


@dataclass(frozen=True)
class Case:
    name: str
    pods: list[PodInfo]
    parallelism: dict[str, int]
    #: Pods bound by the plan, by name.
    binds: set[str]
    #: The elastic gang's bind's ``growth`` text, or its pending reason (prefix).
    says: str = ""
    quota: int = 32
    evicted: set[str] = field(default_factory=set)


CASES = [
    Case("starts at its minimum when that is all that fits",
         [*job_pods("e", [None] * 4, min_member="2"), *job_pods("o", [N2, N3], priority=9)],
         {"e": 4, "o": 2}, {"e-0", "e-1"},
         "started with 0 of 2 optional members (minimum 2)"),
    Case("starts with every member where all fit",
         job_pods("e", [None] * 4, min_member="2"), {"e": 4}, {"e-0", "e-1", "e-2", "e-3"},
         "started with 2 of 2 optional members (minimum 2)"),
    Case("grows into room that appeared",
         job_pods("e", [N0, N1, None, None], min_member="2"), {"e": 4}, {"e-2", "e-3"},
         "growing: 2 of 2 optional members placed"),
    Case("grows as far as the room goes",
         [*job_pods("e", [N0, N1, None, None], min_member="2"), *job_pods("o", [N3])],
         {"e": 4, "o": 1}, {"e-2"}, "growing: 1 of 2 optional members placed; the rest"),
    Case("grows as far as quota goes",
         job_pods("e", [N0, N1, None, None], min_member="2"), {"e": 4}, {"e-2"},
         "growing: 1 of 2 optional members placed", quota=24),
    Case("never displaces anyone to grow, even a lower priority gang",
         [*job_pods("e", [N0, N1, None, None], min_member="2", priority=9),
          *job_pods("o", [N2, N3])],
         {"e": 4, "o": 2}, set(), "growing: 0 of 2 optional members placed"),
    Case("a grown gang's members count for the gangs after it in the cycle",
         [*job_pods("e", [N0, N1, None, None], min_member="2", priority=9),
          *job_pods("z", [None])],
         {"e": 4, "z": 1}, {"e-2"}, "growing: 1 of 2 optional members placed", quota=24),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_grow(case: Case) -> None:
    gangs = grouped(case.pods, case.parallelism)
    plan = decide(Snapshot(NODES, gangs.running), gangs.pending,
                  policies(queue("q", quota={"a100": case.quota})), NOW, solver=SOLVE)
    assert {p.name for b in plan.binds for p, _ in b.pod_nodes} == case.binds
    assert {e.victim for e in plan.evictions} == case.evicted
    bind = plan.bind_of("ns/e")
    said = bind.growth if bind is not None else plan.pending["ns/e"].message
    assert said.startswith(case.says)
    if bind is None:
        assert plan.pending["ns/e"].category is ReasonCategory.PLACEMENT


def test_a_grown_gang_is_one_running_gang_in_the_snapshot() -> None:
    gangs = grouped(job_pods("e", [N0, N1, None, None], min_member="2"), {"e": 4})
    snap = Snapshot(NODES, gangs.running)
    (elastic,) = gangs.running
    assert elastic.min_member == 2 and [n for _, n in elastic.pod_nodes] == [N0, N1]
    plan = decide(snap, gangs.pending, policies(queue("q", quota={"a100": 32})), NOW,
                  solver=SOLVE)
    (bind,) = plan.binds
    assert sorted(n for _, n in bind.pod_nodes) == [N2, N3]
