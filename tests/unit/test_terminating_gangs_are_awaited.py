"""Failover while victims terminate: a new leader (or a restarted scheduler) has no previous
plan, only the cluster state, in which the victims' pods carry a deletionTimestamp. It must
neither pick them as victims again nor evict more for a gang that fits once they are gone.
"""

from __future__ import annotations

from dataclasses import replace

from scheduler.decide.cycle import decide
from scheduler.decide.plan import ReasonCategory
from scheduler.model.workloads import PodInfo, PodPhase
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

NOW = 10_000.0
QUEUES = (queue("q", quota={"a100": 64}),)


def low(name: str, node: str, terminating: bool = False):  # type: ignore[no-untyped-def]
    rg = running(gang(name, "q", pool="a100", priority=0), {node: 1}, start=NOW - 3600)
    return replace(rg, terminating=terminating)


def test_a_terminating_gang_is_never_a_victim_again() -> None:
    """A high-priority gang needing both nodes, one of them already being drained: without
    a previous plan the victim search picked the terminating gang again (a second eviction
    of the same pods, counted as new victims)."""
    snap = Snapshot(nodes("a100", 2), [low("dying", "a100-0000", terminating=True),
                                       low("other", "a100-0001")])
    urgent = gang("urgent", "q", pods=2, pool="a100", priority=100)
    plan = decide(snap, [urgent], policies(*QUEUES), NOW, None, solver=SOLVE)
    assert "ns/dying" not in {e.victim for e in plan.evictions}
    assert all("ns/dying" not in n.victims or n.gang_id != urgent.id or not plan.evictions
               for n in plan.nominations)


def test_a_gang_that_fits_once_terminating_gangs_go_waits_instead_of_evicting() -> None:
    snap = Snapshot(nodes("a100", 2), [low("dying", "a100-0000", terminating=True),
                                       low("other", "a100-0001")])
    urgent = gang("urgent", "q", pool="a100", priority=100)
    plan = decide(snap, [urgent], policies(*QUEUES), NOW, None, solver=SOLVE)
    assert plan.evictions == ()
    reason = plan.pending[urgent.id]
    assert reason.category is ReasonCategory.PREEMPTION_PENDING
    assert "waiting for 1 terminating gang(s) (ns/dying)" in reason.message, reason.message
    assert [(n.gang_id, n.nodes, n.victims) for n in plan.nominations] == [
        (urgent.id, ("a100-0000",), ("ns/dying",))]
    # A second gang of the same kind does not count the same node twice: it preempts.
    second = gang("second", "q", pool="a100", priority=100, created=1.0)
    plan = decide(snap, [urgent, second], policies(*QUEUES), NOW, None, solver=SOLVE)
    assert [e.victim for e in plan.evictions] == ["ns/other"]
    # Next cycle, the evicted pods gone, the waiting gang binds first.
    gone = Snapshot(nodes("a100", 2), [low("other", "a100-0001")])
    after = decide(gone, [urgent], policies(*QUEUES), NOW + 30, plan, solver=SOLVE)
    assert [b.gang_id for b in after.binds] == [urgent.id]


def test_replacements_waiting_for_their_own_evicted_members_are_told_so() -> None:
    """Issue 33: a Job's pods recreated while its evicted ones still terminate are the same
    gang; they were told "waiting for 1 terminating gang(s) (ns/train)", their own."""
    snap = Snapshot(nodes("a100", 1), [low("train", "a100-0000", terminating=True)])
    again = gang("train", "q", pool="a100")
    plan = decide(snap, [again], policies(*QUEUES), NOW, None, solver=SOLVE)
    reason = plan.pending[again.id]
    assert reason.message.startswith("waiting for its own evicted members to finish "
                                     "terminating"), reason.message
    assert "ns/train" not in reason.message and "gang(s)" not in reason.message
    both = Snapshot(nodes("a100", 2), [low("train", "a100-0000", terminating=True),
                                       low("dying", "a100-0001", terminating=True)])
    pair = gang("train", "q", pods=2, pool="a100")
    message = decide(both, [pair], policies(*QUEUES), NOW, None, solver=SOLVE).pending[
        pair.id].message
    assert ("its own evicted members to finish terminating" in message
            and "and 1 terminating gang(s) (ns/dying) to go" in message), message


def test_the_wait_for_terminating_gangs_reads_the_same_on_every_cycle() -> None:
    """The next cycle keeps the nomination from the previous plan; its reason must not turn
    into 'preempted gang(s)', which would claim this scheduler evicted them."""
    snap = Snapshot(nodes("a100", 2), [low("dying", "a100-0000", terminating=True),
                                       low("other", "a100-0001")])
    urgent = gang("urgent", "q", pool="a100", priority=100)
    first = decide(snap, [urgent], policies(*QUEUES), NOW, None, solver=SOLVE)
    second = decide(snap, [urgent], policies(*QUEUES), NOW + 5, first, solver=SOLVE)
    assert second.evictions == () and [n.inherited for n in second.nominations] == [True]
    expected = ("waiting for 1 terminating gang(s) (ns/dying) to go, without evicting more; "
                "nodes held: a100-0000")
    assert first.pending[urgent.id].message == second.pending[urgent.id].message == expected


def test_grouping_marks_a_running_gang_with_a_terminating_pod() -> None:
    from scheduler.feed.grouping import GroupingConfig, build_gang
    from scheduler.model import PodRequirements
    from scheduler.model.resources import GPU, Resources

    req = PodRequirements(Resources({GPU: 8}))
    pods = [PodInfo(f"u{i}", "ns", f"g-{i}", req, scheduler_name="gang-scheduler",
                    node_name=f"n{i}", phase=PodPhase.RUNNING, terminating=i == 0,
                    labels={"gangscheduler.io/gang": "g"}) for i in range(2)]
    entry = build_gang("ns/g", pods, None, None, GroupingConfig(scheduler_name="gang-scheduler"))
    assert entry.running is not None and entry.running.terminating
    entry = build_gang("ns/g", [replace(p, terminating=False) for p in pods], None, None,
                       GroupingConfig(scheduler_name="gang-scheduler"))
    assert entry.running is not None and not entry.running.terminating
