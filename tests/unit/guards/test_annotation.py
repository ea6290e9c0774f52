"""``gangscheduler.io/max-runtime``: read on every kind of gang, warned about when malformed."""

from __future__ import annotations

import pytest

from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.model.annotation_checks import annotation_problems
from scheduler.model.workloads import JobInfo, OwnerRef, PodGroupInfo, PodPhase
from tests.unit.test_grouping import pod

KEY = "gangscheduler.io/max-runtime"
PG = "scheduling.x-k8s.io/pod-group"


@pytest.mark.parametrize(("value", "seconds"), [
    ("12h", 43200.0), ("90m", 5400.0), ("PT2H", 7200.0), ("3600", 3600.0),
    ("soon", None), ("0", None), ("-5m", None), ("400d", None), ("", None)])
def test_a_lone_pods_limit(value: str, seconds: float | None) -> None:
    out = build_gangs([pod("a", annotations={KEY: value})], {}, {}, GroupingConfig())
    assert out.pending[0].max_runtime == seconds


def test_read_on_a_job_a_podgroup_and_a_running_gang() -> None:
    job_pods = [pod(f"j-{i}", owner=OwnerRef("Job", "j", "juid")) for i in range(2)]
    jobs = {"ns/j": JobInfo("ns", "j", "juid", parallelism=2, annotations={KEY: "1h"})}
    (gang,) = build_gangs(job_pods, {}, jobs, GroupingConfig()).pending
    assert gang.max_runtime == 3600.0
    group_pods = [pod(f"w{i}", labels={PG: "g"}, node="n1", phase=PodPhase.RUNNING)
                  for i in range(2)]
    groups = {"ns/g": PodGroupInfo("ns", "g", min_member=2, annotations={KEY: "30m"})}
    out = build_gangs(group_pods, groups, {}, GroupingConfig())
    assert out.running_by_id["ns/g"].gang.max_runtime == 1800.0


@pytest.mark.parametrize(("value", "says"), [
    ("soon", "cannot read 'soon'"), ("0", "cannot read '0'"),
    ("400d", "more than 365d")])
def test_a_malformed_limit_is_warned_with_what_happens_instead(value: str, says: str) -> None:
    (problem,) = annotation_problems({KEY: value})
    assert problem.startswith(f"annotation {KEY}: ") and says in problem, problem
    assert "its queue's maxRuntimeSeconds, if any, still applies" in problem
