"""``maxRuntimeSeconds`` counts a workload's runs together (``Gang.ran_before``): a Job or
JobSet its controller restarts gets what is left of the limit, and none once it is used up."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policies.guards import runtime_spent
from scheduler.decide.cycle import decide
from scheduler.decide.plan import ReasonCategory
from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.model.annotation_checks import annotation_problems
from scheduler.model.workloads import JobInfo, OwnerRef, PodPhase
from scheduler.world.snapshot import Snapshot
from tests.unit.guards.test_decide import NODES, NOW, guarded, plan_of
from tests.unit.policies.builders import SOLVE, gang, policies, queue, running
from tests.unit.test_grouping import pod

KEY = "gangscheduler.io/runtime-seconds"
LIMIT = [guarded(max_runtime_seconds=3600)]


@pytest.mark.parametrize(("before", "this_run", "evicted"), [
    (0.0, 3599, False), (0.0, 3600, True),
    (3000.0, 599, False), (3000.0, 600, True),  # the earlier runs count
    (3600.0, 0, True),                           # nothing left: out as soon as it runs
])
def test_the_limit_counts_earlier_runs(before: float, this_run: float, evicted: bool) -> None:
    rg = running(replace(gang("g"), ran_before=before), {"a-0000": 1}, start=NOW - this_run)
    plan = plan_of(LIMIT, [], [rg])
    assert [e.victim for e in plan.evictions] == (["ns/g"] if evicted else [])


def test_the_eviction_says_both_runs_and_the_wake_counts_what_is_left() -> None:
    rg = running(replace(gang("g"), ran_before=3000.0), {"a-0000": 1}, start=NOW - 660)
    (eviction,) = plan_of(LIMIT, [], [rg]).evictions
    assert eviction.message == ("preempted: queue q allows 1h00m of runtime; this gang ran "
                                "1h01m (this run 11m, earlier runs 50m)")
    young = running(replace(gang("y"), ran_before=3000.0), {"a-0000": 1}, start=NOW - 60)
    assert plan_of(LIMIT, [], [young]).wake == NOW + 540


@pytest.mark.parametrize(("before", "own", "held"), [
    (0.0, None, False), (3599.0, None, False), (3612.0, None, True),
    (700.0, 600.0, True),  # its own annotation's limit counts the same way
])
def test_a_gang_whose_workload_used_its_limit_is_not_started(before: float, own: float | None,
                                                              held: bool) -> None:
    g = replace(gang("train"), ran_before=before, max_runtime=own)
    plan = plan_of(LIMIT, [g])
    assert ([b.gang_id for b in plan.binds] == []) is held
    if held:
        reason = plan.pending["ns/train"]
        assert reason.category is ReasonCategory.QUEUE_LIMIT
        assert reason.message.startswith(f"ns/train ran {before:,.0f} s of the ")


def test_the_held_reason_names_limit_and_time() -> None:
    assert runtime_spent("ns/train", (3600.0, "queue team-a"), 3612.0) == (
        "ns/train ran 3,612 s of the 3,600 s runtime limit of queue team-a in earlier runs: "
        "not started again (raise the limit, or remove the gangscheduler.io/runtime-seconds "
        "annotation of its owner to start afresh)")
    assert runtime_spent("ns/train", None, 1e9) is None


def test_held_by_its_own_limit_without_queue_guards() -> None:
    g = replace(gang("g"), ran_before=120.0, max_runtime=60.0)
    plan = decide(Snapshot(NODES, ()), [g], policies(queue("q", quota={"a": 64})), NOW,
                  solver=SOLVE)
    assert plan.binds == () and "ns/g ran 120 s" in plan.pending["ns/g"].message


def test_read_from_the_job_and_the_jobset() -> None:
    job_pods = [pod(f"j-{i}", owner=OwnerRef("Job", "j", "juid")) for i in range(2)]
    jobs = {"ns/j": JobInfo("ns", "j", "juid", parallelism=2, annotations={KEY: "3612.5"})}
    (g,) = build_gangs(job_pods, {}, jobs, GroupingConfig()).pending
    assert g.ran_before == 3612.5
    run = [pod("r", node="n1", phase=PodPhase.RUNNING, annotations={KEY: "60"})]
    assert build_gangs(run, {}, {}, GroupingConfig()).running_by_id["ns/r"].gang.ran_before == 60


@pytest.mark.parametrize("value", ["soon", "-5", "nan", "inf"])
def test_a_malformed_value_is_warned_and_counts_as_zero(value: str) -> None:
    (g,) = build_gangs([pod("a", annotations={KEY: value})], {}, {}, GroupingConfig()).pending
    assert g.ran_before == 0.0
    (problem,) = annotation_problems({KEY: value})
    assert problem.startswith(f"annotation {KEY}: cannot read ") and "treated as 0" in problem
