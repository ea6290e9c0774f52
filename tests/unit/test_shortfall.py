"""A running gang below its minimum is seen: how many members, which ranks, told once.

The cases are what users meet: a node lost under an Indexed Job (one rank evicted, the Job
controller yet to recreate it, then its replacement pending), a PodGroup whose members finish
at different times (not short), a whole gang evicted (pending again, not short); and what
issue 33 saw wrongly told: ranks that succeed before their Job counts them, this scheduler's
own whole-gang preemption seen one pod at a time, an admin evicting every member.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.kube.events import EventReason, EventType, ObjectRef
from scheduler.kube.write.group_sync import group_status
from scheduler.kube.write.shortfalls import ShortfallReporter
from scheduler.model.shortfall import COMPLETION_INDEX_LABEL, Shortfall, parse_indexes
from scheduler.model.workloads import JobInfo, OwnerRef, PodGroupInfo, PodInfo, PodPhase
from scheduler.run.metrics import SchedulerMetrics
from tests.unit.test_grouping import GPU1, PG, pod

JOB = OwnerRef("Job", "train", "job-uid")


def rank(i: int, *, node: str = "", phase: PodPhase = PodPhase.PENDING,
         terminating: bool = False, suffix: str = "", disruption: str = "") -> PodInfo:
    return replace(pod(f"train-{i}{suffix}", node=node, owner=JOB, req=GPU1,
                       phase=PodPhase.RUNNING if node and phase is PodPhase.PENDING else phase,
                       labels={COMPLETION_INDEX_LABEL: str(i)}, terminating=terminating),
                   disruption=disruption)


def running(*ranks: int) -> list[PodInfo]:
    return [rank(i, node=f"n{i}") for i in ranks]


def evicted(i: int, reason: str = "EvictionByEvictionAPI") -> PodInfo:
    """Rank *i* leaving through an eviction (terminating, DisruptionTarget *reason*)."""
    return rank(i, node=f"n{i}", terminating=True, disruption=reason)


def indexed_job(completions: int = 4, succeeded: int = 0, done: str = "") -> JobInfo:
    return JobInfo("ns", "train", "job-uid", parallelism=completions, completions=completions,
                   succeeded=succeeded, indexed=True, completed_indexes=parse_indexes(done))


@dataclass
class Case:
    name: str
    pods: list[PodInfo]
    jobs: dict[str, JobInfo] = field(default_factory=dict)
    groups: dict[str, PodGroupInfo] = field(default_factory=dict)
    gang: str = "ns/train"
    expected: Shortfall | None = None


CASES = [
    Case("whole gang running is not short",
         [rank(i, node=f"n{i}") for i in range(4)], {"ns/train": indexed_job()}),
    Case("a rank evicted from a lost node, not yet recreated",
         [rank(0, node="n0", terminating=True), *(rank(i, node=f"n{i}") for i in (1, 2, 3))],
         {"ns/train": indexed_job()},
         expected=Shortfall(present=3, minimum=4, missing_ranks=(0,))),
    Case("the lost rank's replacement waits to be placed",
         [rank(0, suffix="-retry"), *(rank(i, node=f"n{i}") for i in (1, 2, 3))],
         {"ns/train": indexed_job()},
         expected=Shortfall(present=3, minimum=4, replacements=1, missing_ranks=(0,))),
    Case("completed ranks are not missing: ranks 0-1 done, 3 lost",
         [rank(2, node="n2")], {"ns/train": indexed_job(succeeded=2, done="0-1")},
         expected=Shortfall(present=1, minimum=2, missing_ranks=(3,))),
    Case("a whole gang evicted is pending again, not short",
         [rank(i, node=f"n{i}", terminating=True) for i in range(4)],
         {"ns/train": indexed_job()}),
    Case("a PodGroup whose members finish at different times is not short",
         [pod("w0", node="n0", labels={PG: "g"}, phase=PodPhase.SUCCEEDED),
          pod("w1", node="n1", labels={PG: "g"}, phase=PodPhase.RUNNING)],
         groups={"ns/g": PodGroupInfo("ns", "g", min_member=2)}, gang="ns/g"),
    Case("a rank Succeeded before its Indexed Job counts it is done, not missing",
         [*running(0, 1, 3), rank(2, node="n2", phase=PodPhase.SUCCEEDED)],
         {"ns/train": indexed_job()}),
    Case("a rank Succeeded and counted, another lost: only the lost one is missing",
         [rank(0, node="n0", terminating=True), *running(1, 3),
          rank(2, node="n2", phase=PodPhase.SUCCEEDED)],
         {"ns/train": indexed_job(succeeded=1, done="2")},
         expected=Shortfall(present=2, minimum=3, missing_ranks=(0,))),
    Case("a pod of a plain Job Succeeded before the Job counts it is not a loss",
         [pod(f"p{i}", node=f"n{i}", owner=JOB, phase=PodPhase.RUNNING) for i in range(3)]
         + [pod("p3", node="n3", owner=JOB, phase=PodPhase.SUCCEEDED)],
         {"ns/train": JobInfo("ns", "train", "job-uid", parallelism=4, completions=4)}),
    Case("the scheduler's own preemption seen half way (2 evicted, 2 not yet) is not short",
         [evicted(0), evicted(1, "PreemptionByScheduler"), *running(2, 3)],
         {"ns/train": indexed_job()}),
    Case("an admin evicting every member, 3 of 4 on their way, is not short",
         [evicted(0), evicted(1), evicted(2), *running(3)], {"ns/train": indexed_job()}),
    Case("an admin evicted one member and it is gone (Failed): the rest are short",
         [rank(0, node="n0", terminating=True, phase=PodPhase.FAILED,
               disruption="EvictionByEvictionAPI"), *running(1, 2, 3)],
         {"ns/train": indexed_job()},
         expected=Shortfall(present=3, minimum=4, missing_ranks=(0,))),
    Case("a rank on a lost node (the taint manager's eviction) leaves the rest short",
         [evicted(0, "DeletionByTaintManager"), *running(1, 2, 3)],
         {"ns/train": indexed_job()},
         expected=Shortfall(present=3, minimum=4, missing_ranks=(0,))),
    Case("a PodGroup member failed: short, no ranks without indexes",
         [pod("w0", node="n0", labels={PG: "g"}, phase=PodPhase.FAILED),
          pod("w1", node="n1", labels={PG: "g"}, phase=PodPhase.RUNNING)],
         groups={"ns/g": PodGroupInfo("ns", "g", min_member=2)}, gang="ns/g",
         expected=Shortfall(present=1, minimum=2)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_shortfall_of_a_running_gang(case: Case) -> None:
    gangs = build_gangs(case.pods, case.groups, case.jobs, GroupingConfig())
    running = gangs.running_by_id.get(case.gang)
    assert running is not None
    assert running.shortfall == case.expected


def test_the_description_names_the_missing_ranks_and_what_comes_next() -> None:
    assert Shortfall(3, 4, missing_ranks=(0,)).describe() == (
        "3 of 4 members running: 1 missing (rank 0); no replacement created yet")
    many = Shortfall(1, 12, replacements=11, missing_ranks=tuple(range(1, 12)))
    assert many.describe() == ("1 of 12 members running: 11 missing (ranks 1, 2, 3, 4, 5, 6, 7,"
                               " 8 and 3 more); 11 replacement(s) waiting to be placed")


@pytest.mark.parametrize(("text", "indexes"), [
    ("", frozenset()), ("3", {3}), ("0-2,5", {0, 1, 2, 5}), (" 1 , 4-5 ", {1, 4, 5})])
def test_completed_indexes_parse(text: str, indexes: set[int]) -> None:
    assert parse_indexes(text) == indexes


@pytest.mark.parametrize("text", ["a", "1-", "-3", "1-x", "1;2"])
def test_malformed_completed_indexes_name_the_part(text: str) -> None:
    with pytest.raises(ValueError, match="not an index or a range"):
        parse_indexes(text)


def test_the_podgroup_condition_says_below_minimum() -> None:
    pods = [pod("w0", node="n0", phase=PodPhase.RUNNING)]
    status = group_status(2, pods, Shortfall(1, 2))
    assert status is not None
    assert (status.reason, status.message) == (
        "BelowMinimum", "1 of 2 members running: 1 missing; no replacement created yet")
    whole = group_status(1, pods)
    assert whole is not None and whole.reason == "Running"


class Events:
    def __init__(self) -> None:
        self.sent: list[tuple[ObjectRef, str, str, EventType]] = []

    def emit(self, regarding: ObjectRef, reason: str, message: str,
             type_: EventType = EventType.NORMAL, action: str = "Scheduling") -> bool:
        self.sent.append((regarding, str(reason), message, type_))
        return True


def test_a_short_gang_is_told_once_per_change_then_restored() -> None:
    job = {"ns/train": indexed_job()}
    lost = [rank(0, node="n0", terminating=True), *(rank(i, node=f"n{i}") for i in (1, 2, 3))]
    retry = [rank(0, suffix="-retry"), *(rank(i, node=f"n{i}") for i in (1, 2, 3))]
    whole = [rank(0, node="n9", suffix="-retry"), *(rank(i, node=f"n{i}") for i in (1, 2, 3))]
    events, metrics = Events(), SchedulerMetrics()
    current: list[PodInfo] = []
    reporter = ShortfallReporter(events, metrics, lambda gid: None,  # type: ignore[arg-type]
                                 lambda gid: current)

    def cycle(pods: list[PodInfo], now: float = 10.0) -> None:
        current[:] = pods
        reporter.report(build_gangs(pods, {}, job, GroupingConfig()).running_by_id, now)

    cycle(whole, 0.0)  # whole: what the reporter starts from (else see the last test)
    cycle(lost, 1.0)  # short, not for long enough yet
    assert events.sent == []
    cycle(lost)  # short for 9 s: told
    cycle(lost)  # unchanged: no second event
    cycle(retry)  # the replacement is there: what is missing changed
    cycle(whole)
    assert [(e[1], e[3]) for e in events.sent] == [
        (EventReason.BELOW_MINIMUM, EventType.WARNING),
        (EventReason.BELOW_MINIMUM, EventType.WARNING),
        (EventReason.MINIMUM_RESTORED, EventType.NORMAL)]
    assert {e[0] for e in events.sent} == {ObjectRef("Job", "ns", "train", "job-uid", "batch/v1")}
    assert "rank 0" in events.sent[0][2] and "no replacement" in events.sent[0][2]
    assert "1 replacement(s) waiting" in events.sent[1][2]
    gauge = metrics.registry.get_sample_value("gang_scheduler_gangs_below_minimum",
                                              {"queue": "default"})
    assert gauge is None  # restored: the series is gone


def reporter_for(job: JobInfo) -> tuple[Events, Callable[[list[PodInfo], float], None]]:
    """Events sent, and a cycle that reports the gang *pods* amount to at a time."""
    events, current = Events(), list[PodInfo]()
    reporter = ShortfallReporter(events, SchedulerMetrics(),  # type: ignore[arg-type]
                                 lambda gid: None, lambda gid: current)

    def cycle(pods: list[PodInfo], now: float) -> None:
        current[:] = pods
        reporter.report(build_gangs(pods, {}, {job.key: job}, GroupingConfig()).running_by_id,
                        now)
    return events, cycle


LEFT = rank(0, node="n0", phase=PodPhase.FAILED, disruption="EvictionByEvictionAPI")


@pytest.mark.parametrize(("name", "steps", "told"), [
    ("the scheduler preempts the whole gang, its pods seen going one by one",
     [(0, running(0, 1, 2, 3)), (1, [evicted(0, "PreemptionByScheduler"), *running(1, 2, 3)]),
      (2, [evicted(0), evicted(1), *running(2, 3)]), (3, [evicted(i) for i in range(4)]),
      (30, [])], []),
    ("an admin evicts every member, one every 3 s, each gone at once",
     [(0, running(0, 1, 2, 3)), (3, [LEFT, *running(1, 2, 3)]), (6, [LEFT, *running(2, 3)]),
      (9, [LEFT, *running(3)]), (12, [LEFT]), (30, [])], []),
    ("a node is lost for good under one rank: told once settled, not restored when the "
     "gang is then evicted whole",
     [(0, running(0, 1, 2, 3)), (1, [evicted(0, "DeletionByTaintManager"), *running(1, 2, 3)]),
      (10, [evicted(0, "DeletionByTaintManager"), *running(1, 2, 3)]),
      (11, [evicted(0, "DeletionByTaintManager"), *(evicted(i) for i in (1, 2, 3))]),
      (30, [])], [EventReason.BELOW_MINIMUM]),
    ("a lost rank replaced: told short, then restored once its replacement runs",
     [(0, [evicted(0, "DeletionByTaintManager"), *running(1, 2, 3)]),
      (10, [evicted(0, "DeletionByTaintManager"), *running(1, 2, 3)]),
      (20, [rank(0, node="n9", suffix="-retry"), *running(1, 2, 3)])],
     [EventReason.BELOW_MINIMUM, EventReason.MINIMUM_RESTORED]),
    ("a rank finishes first (its Job counts it a moment later): nothing to tell",
     [(0, running(0, 1, 2, 3)), (1, [rank(0, node="n0", phase=PodPhase.SUCCEEDED),
                                     *running(1, 2, 3)]),
      (30, [rank(0, node="n0", phase=PodPhase.SUCCEEDED), *running(1, 2, 3)])], []),
])
def test_what_is_told_over_a_sequence(name: str, steps: list[tuple[float, list[PodInfo]]],
                                      told: list[EventReason]) -> None:
    events, cycle = reporter_for(indexed_job())
    for now, pods in steps:
        cycle(pods, now)
    assert [e[1] for e in events.sent] == told, name


def test_a_shortfall_there_at_the_first_report_is_told_at_once() -> None:
    """A restarted scheduler (or a new leader) finds a gang short: it was short before this
    reporter existed, so it is told at once, and restored when its replacement runs
    (``tests/e2e/test_node_failure.py`` restarts the scheduler between the two)."""
    events, cycle = reporter_for(indexed_job())
    cycle([evicted(0, "DeletionByTaintManager"), *running(1, 2, 3)], 0.0)
    cycle([rank(0, node="n9", suffix="-retry"), *running(1, 2, 3)], 1.0)
    assert [e[1] for e in events.sent] == [EventReason.BELOW_MINIMUM,
                                           EventReason.MINIMUM_RESTORED]


def test_a_shortfall_with_no_cycle_after_it_is_told_once_settled() -> None:
    """An idle loop runs no cycle after a gang goes short (nothing else changes): the reporter
    says when its shortfall settles, and ``settle`` then tells it from the last cycle's gangs."""
    events, current = Events(), [rank(0, node="n0", terminating=True),
                                 *(rank(i, node=f"n{i}") for i in (1, 2, 3))]
    job = {"ns/train": indexed_job()}
    reporter = ShortfallReporter(events, SchedulerMetrics(),  # type: ignore[arg-type]
                                 lambda gid: None, lambda gid: current)
    whole = [rank(0, node="n9"), *current[1:]]
    reporter.report(build_gangs(whole, {}, job, GroupingConfig()).running_by_id, 0.0)
    assert reporter.due_in(0.0) is None  # nothing short: no deadline
    reporter.report(build_gangs(current, {}, job, GroupingConfig()).running_by_id, 1.0)
    assert events.sent == []
    assert reporter.due_in(2.0) == pytest.approx(4.0)  # short at 1.0, settles at 6.0
    reporter.settle(5.9)
    assert events.sent == []
    assert reporter.due_in(7.0) == 0.0
    reporter.settle(7.0)
    assert [e[1] for e in events.sent] == [EventReason.BELOW_MINIMUM]
    assert reporter.due_in(8.0) is None  # told: nothing waits
