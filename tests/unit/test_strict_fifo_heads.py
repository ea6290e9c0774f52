"""A StrictFIFO queue waits behind its head only while the head could start some day.

Table-driven through ``decide``: a head that can never start on this cluster (a pod larger
than any node, no node it may use, more than its queue's quota could ever cover) lets the
gangs behind it be tried and says so; a head that cannot start *now* (capacity in use, quota
in use) still blocks its queue; and a head set aside heads its queue again once the nodes or
the quota would let it fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from policies.queues import Queue
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.model import Gang, Node, RunningGang
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

R = ReasonCategory
NOW = 10_000.0
EIGHTS = tuple(nodes("a100", 2))  # two 8-GPU nodes
BIG = tuple(nodes("big", 1, gpus=16))  # one 16-GPU node, pool "big"


def strict(quota: int = 64, pool: str = "a100") -> Queue:
    return queue("q", quota={pool: quota}, strategy="StrictFIFO")


def head(gpus: int = 16, pods: int = 1, pool: str | None = None) -> Gang:
    return gang("head", "q", gpus=gpus, pods=pods, created=1, pool=pool)


FOLLOWER = gang("next", "q", gpus=8, created=2)
STRICT = strict()
NOT_HEADING = "does not hold it"  # the pending reason's words (decisions unchanged)


@dataclass(frozen=True)
class Case:
    name: str
    head: Gang
    queue: Queue = STRICT
    nodes: Sequence[Node] = EIGHTS
    running: Sequence[RunningGang] = ()
    #: Does the follower start (the head set aside), or wait behind the head?
    follower_starts: bool = True
    head_reason: ReasonCategory = R.PLACEMENT


CASES = [
    # Can never start on this cluster: the queue does not wait for it.
    Case("a pod larger than any node (1 x 16 GPUs on 8-GPU nodes)", head()),
    Case("no node it may use (its pool has none)", head(gpus=8, pool="tpu")),
    Case("more than its queue's quota could ever cover", head(gpus=8, pods=2),
         queue=strict(quota=8), head_reason=R.QUOTA),
    # Cannot start now: it blocks its queue.
    Case("the nodes it needs are busy", head(gpus=8, pods=2),
         running=(running(gang("other", "q"), {"a100-0000": 1}),),
         follower_starts=False, head_reason=R.PLACEMENT),
    # Something changed so that it could fit: it heads its queue again.
    Case("a 16-GPU node was added (busy now)", head(),
         queue=queue("q", quota={"a100": 64, "big": 64}, strategy="StrictFIFO"),
         nodes=(*EIGHTS, *BIG), running=(running(gang("other", "q", gpus=16), {"big-0000": 1}),),
         follower_starts=False),
    Case("its quota was raised to 16 (8 in use now)", head(gpus=8, pods=2),
         queue=strict(quota=16), running=(running(gang("other", "q"), {"a100-0000": 1}),),
         follower_starts=False, head_reason=R.QUOTA),
]


def run(case: Case) -> CyclePlan:
    pol = policies(case.queue, preemption=False, reservation=False)
    return decide(Snapshot(case.nodes, case.running), [case.head, FOLLOWER], pol, NOW,
                  solver=SOLVE)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_strict_queue_waits_only_for_a_head_that_could_start(case: Case) -> None:
    plan = run(case)
    reason = plan.pending["ns/head"]
    assert reason.category is case.head_reason, reason
    if case.follower_starts:
        assert [b.gang_id for b in plan.binds] == ["ns/next"]
        assert NOT_HEADING in reason.message and "queue q is StrictFIFO" in reason.message, reason
    else:
        assert plan.binds == () and NOT_HEADING not in reason.message, reason
        behind = plan.pending["ns/next"]
        assert behind.category is R.QUEUED and "its head ns/head cannot start yet" in behind.message


def test_set_aside_then_heading_again_when_a_node_that_fits_it_comes() -> None:
    pol = policies(queue("q", quota={"a100": 64, "big": 64}, strategy="StrictFIFO"),
                   preemption=False, reservation=False)
    waiting = [head(), FOLLOWER, gang("last", "q", gpus=8, created=3)]
    before = decide(Snapshot(EIGHTS), waiting, pol, NOW, solver=SOLVE)
    assert sorted(b.gang_id for b in before.binds) == ["ns/last", "ns/next"]
    # A 16-GPU node joins, busy: the head could start once it frees, so it heads again.
    busy = running(gang("other", "q", gpus=16), {"big-0000": 1})
    after = decide(Snapshot((*EIGHTS, *BIG), [busy]), waiting, pol, NOW, solver=SOLVE)
    assert after.binds == ()
    assert after.pending["ns/next"].category is R.QUEUED
    # Free: it starts, ahead of the others.
    free = decide(Snapshot((*EIGHTS, *BIG)), waiting, pol, NOW, solver=SOLVE)
    assert next(b.gang_id for b in free.binds) == "ns/head"


def test_a_best_effort_queue_is_unchanged() -> None:
    pol = policies(queue("q", quota={"a100": 64}), preemption=False, reservation=False)
    plan = decide(Snapshot(EIGHTS), [head(), FOLLOWER], pol, NOW, solver=SOLVE)
    assert [b.gang_id for b in plan.binds] == ["ns/next"]
    assert NOT_HEADING not in plan.pending["ns/head"].message
