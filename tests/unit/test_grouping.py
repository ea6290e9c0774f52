"""How pods become gangs: PodGroup label, Volcano annotation, Job parallelism, lone pods."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.model import PodRequirements, Resources
from scheduler.model.demand import gpus_of
from scheduler.model.durations import parse_duration, parse_time
from scheduler.model.workloads import JobInfo, OwnerRef, PodGroupInfo, PodInfo, PodPhase

GPU1 = PodRequirements(requests=Resources.of(gpu=1, cpu=1000))
GPU8 = PodRequirements(requests=Resources.of(gpu=8, cpu=8000))


def pod(name: str, *, ns: str = "ns", node: str = "", req: PodRequirements = GPU1,
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        owner: OwnerRef | None = None, scheduler: str = "gang-scheduler",
        phase: PodPhase = PodPhase.PENDING, created: float = 0.0,
        terminating: bool = False) -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace=ns, name=name, requirements=req,
                   scheduler_name=scheduler, node_name=node, phase=phase,
                   labels=labels or {}, annotations=annotations or {}, owner=owner,
                   creation_time=created, terminating=terminating)


@dataclass
class Case:
    name: str
    pods: list[PodInfo]
    groups: dict[str, PodGroupInfo] = field(default_factory=dict)
    jobs: dict[str, JobInfo] = field(default_factory=dict)
    # gang id -> (min_member, size, waiting_for_members)
    pending: dict[str, tuple[int, int, bool]] = field(default_factory=dict)
    running: set[str] = field(default_factory=set)
    problems: set[str] = field(default_factory=set)


PG = "scheduling.x-k8s.io/pod-group"
JOB_J = OwnerRef("Job", "j", "juid")
CASES = [
    Case("lone pod is a gang of one", [pod("a")], pending={"ns/a": (1, 1, False)}),
    Case("podgroup with minMember 4 and 3 pods waits for members",
         [pod(f"w{i}", labels={PG: "g"}) for i in range(3)],
         groups={"ns/g": PodGroupInfo("ns", "g", min_member=4)},
         pending={"ns/g": (4, 3, True)}),
    Case("podgroup complete",
         [pod(f"w{i}", labels={PG: "g"}) for i in range(4)],
         groups={"ns/g": PodGroupInfo("ns", "g", min_member=4)},
         pending={"ns/g": (4, 4, False)}),
    Case("podgroup label without PodGroup object is a problem, not a gang",
         [pod("w0", labels={PG: "missing"})], problems={"ns/missing"}),
    Case("volcano annotation with min-member annotation",
         [pod(f"v{i}", annotations={"scheduling.k8s.io/group-name": "vg",
                                    "gangscheduler.io/min-member": "2"}) for i in range(2)],
         pending={"ns/vg": (2, 2, False)}),
    Case("job pods form a gang of parallelism",
         [pod(f"j-{i}", owner=OwnerRef("Job", "j", "juid")) for i in range(8)],
         jobs={"ns/j": JobInfo("ns", "j", "juid", parallelism=8)},
         pending={"ns/j": (8, 8, False)}),
    # Regression (issue 11, first stall): the controller makes only `completions` pods, so
    # a gang of `parallelism` would wait for members that never come.
    Case("a Job with more parallelism than completions is a gang of its completions",
         [pod(f"j-{i}", owner=OwnerRef("Job", "j", "juid")) for i in range(2)],
         jobs={"ns/j": JobInfo("ns", "j", "juid", parallelism=4, completions=2)},
         pending={"ns/j": (2, 2, False)}),
    # Regression (second stall): ranks 0-2 Succeeded, rank 3 is retried: it runs alone.
    Case("completions already succeeded count: an Indexed Job's last rank is a gang of one",
         [pod("j-3", owner=OwnerRef("Job", "j", "juid"))],
         jobs={"ns/j": JobInfo("ns", "j", "juid", parallelism=4, completions=4,
                               succeeded=3)},
         pending={"ns/j": (1, 1, False)}),
    # Regression (#41): a member of a gang cut mid-bind finished before its Job's status
    # counted it; the gang looked short of a member and a takeover rolled it back.
    Case("a Job's pods seen Succeeded count before its status does",
         [pod("j-0", owner=JOB_J, node="n1", phase=PodPhase.SUCCEEDED),
          pod("j-1", owner=JOB_J, node="n1", phase=PodPhase.RUNNING),
          *(pod(f"j-{i}", owner=JOB_J) for i in range(2, 6))],
         jobs={"ns/j": JobInfo("ns", "j", "juid", parallelism=6, completions=6)},
         pending={"ns/j": (4, 4, False)}, running={"ns/j"}),
    Case("a Job without completions runs parallelism pods",
         [pod(f"j-{i}", owner=OwnerRef("Job", "j", "juid")) for i in range(3)],
         jobs={"ns/j": JobInfo("ns", "j", "juid", parallelism=3, completions=None,
                               succeeded=5)},
         pending={"ns/j": (3, 3, False)}),
    Case("job pods seen before their Job wait for it, never lone pods",
         [pod(f"j-{i}", owner=OwnerRef("Job", "j", "juid")) for i in range(8)],
         problems={"ns/j"}),
    Case("bound members count towards minMember",
         [pod("w0", labels={PG: "g"}, node="n1", phase=PodPhase.RUNNING),
          pod("w1", labels={PG: "g"})],
         groups={"ns/g": PodGroupInfo("ns", "g", min_member=2)},
         pending={"ns/g": (1, 1, False)}, running={"ns/g"}),
    # Regression (issue 11, the partial path): a Job being evicted, whose controller
    # creates replacements at once. Counting the 4 terminating members made the gang
    # "complete" and the first 2 replacements optional extras, bound at once (2 of 4).
    Case("an evicted Job's replacements are a new gang: leaving members count for nothing",
         [*(pod(f"j-{i}", owner=JOB_J, node="n1", phase=PodPhase.RUNNING, terminating=True)
            for i in range(4)),
          *(pod(f"j-new-{i}", owner=JOB_J) for i in range(2))],
         jobs={"ns/j": JobInfo("ns", "j", "juid", parallelism=4)},
         pending={"ns/j": (4, 2, True)}, running={"ns/j"}),
    Case("all replacements of an evicted Job: the whole gang, none optional",
         [*(pod(f"j-{i}", owner=JOB_J, node="n1", phase=PodPhase.RUNNING, terminating=True)
            for i in range(4)),
          *(pod(f"j-new-{i}", owner=JOB_J) for i in range(4))],
         jobs={"ns/j": JobInfo("ns", "j", "juid", parallelism=4)},
         pending={"ns/j": (4, 4, False)}, running={"ns/j"}),
    Case("one member lost from a running gang: its replacement is a repair of one",
         [*(pod(f"j-{i}", owner=JOB_J, node="n1", phase=PodPhase.RUNNING) for i in range(3)),
          pod("j-3", owner=JOB_J, node="n2", phase=PodPhase.RUNNING, terminating=True),
          pod("j-new-3", owner=JOB_J)],
         jobs={"ns/j": JobInfo("ns", "j", "juid", parallelism=4)},
         pending={"ns/j": (1, 1, False)}, running={"ns/j"}),
    Case("pods of other schedulers are capacity, not gangs",
         [pod("x", scheduler="default-scheduler", node="n1", phase=PodPhase.RUNNING)]),
    Case("finished pods are ignored",
         [pod("done", node="n1", phase=PodPhase.SUCCEEDED)]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_grouping(case: Case) -> None:
    out = build_gangs(case.pods, case.groups, case.jobs, GroupingConfig())
    got = {g.id: (g.min_member, g.size, not g.is_complete) for g in out.pending}
    assert got == case.pending
    assert {r.id for r in out.running} == case.running
    assert set(out.problems) == case.problems


def test_other_scheduler_usage_is_charged_to_node() -> None:
    out = build_gangs([pod("x", scheduler="default-scheduler", node="n1",
                           phase=PodPhase.RUNNING, req=GPU8)], {}, {}, GroupingConfig())
    assert gpus_of(out.other_usage["n1"]) == 8


def test_partially_bound_gang_is_reported() -> None:
    pods = [pod("w0", labels={PG: "g"}, node="n1")]
    pods += [pod(f"w{i}", labels={PG: "g"}) for i in (1, 2)]
    out = build_gangs(pods, {"ns/g": PodGroupInfo("ns", "g", min_member=3)}, {}, GroupingConfig())
    assert [str(p) for p in out.partially_bound["ns/g"]] == ["ns/w0"]
    (gang,) = out.pending
    assert gang.min_member == 2


def test_per_pod_baseline_splits_gangs() -> None:
    pods = [pod(f"w{i}", labels={PG: "g"}) for i in range(4)]
    out = build_gangs(pods, {"ns/g": PodGroupInfo("ns", "g", min_member=4)}, {},
                      GroupingConfig(per_pod=True))
    assert sorted(g.id for g in out.pending) == [f"ns/w{i}" for i in range(4)]


def test_roles_split_by_requirements_and_queue_from_label() -> None:
    pods = [pod("launcher", req=GPU1, labels={PG: "g", "gangscheduler.io/role": "launcher"})]
    pods += [pod(f"worker-{i}", req=GPU8, labels={PG: "g", "gangscheduler.io/role": "worker"})
             for i in range(3)]
    group = PodGroupInfo("ns", "g", min_member=4, labels={"gangscheduler.io/queue": "team-a"})
    (gang,) = build_gangs(pods, {"ns/g": group}, {}, GroupingConfig()).pending
    assert gang.queue == "team-a"
    assert sorted((r.name, r.count) for r in gang.roles) == [("launcher", 1), ("worker", 3)]
    assert gang.gpus == 25


@pytest.mark.parametrize("text,seconds", [
    ("3600", 3600), ("3600s", 3600), ("90m", 5400), ("2h", 7200), ("1h30m", 5400), ("45s", 45),
    ("1.5h", 5400), ("1d", 86400), ("1d12h", 129600), ("2w", 1209600), (" 2H ", 7200),
    ("PT2H", 7200), ("PT90M", 5400), ("P1DT2H30M", 95400), ("P2D", 172800), ("pt30m", 1800),
    ("P1W", 604800), ("PT0.5H", 1800)])
def test_parse_duration(text: str, seconds: float) -> None:
    """The forms users write (what `kubectl`, Go and ISO 8601 tools take) all parse."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "-5", "soon", "P", "PT", "P1H", "1x", "h", "2h-1m"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"not a duration: .* \(accepted: seconds \(3600\)"):
        parse_duration(text)


def test_parse_time_takes_rfc3339_and_refuses_what_has_no_zone() -> None:
    assert parse_time("2026-11-30T09:00:00Z") == parse_time("2026-11-30T10:00:00+01:00")
    assert parse_time("2026-11-30T09:00:00.250Z") % 1 == 0.25
    for bad in ("yesterday", "2026-11-30T09:00:00", "", "30/11/2026"):
        with pytest.raises(ValueError, match="not a time"):
            parse_time(bad)


@pytest.mark.parametrize(("job_created", "pods_created", "expected"), [
    (100.0, (500.0, 510.0), 100.0),  # pods recreated after an eviction: the Job's age counts
    (0.0, (500.0, 510.0), 500.0),  # a Job without a creation time: the oldest pod's
])
def test_a_jobs_gang_is_as_old_as_its_job(job_created: float, pods_created: tuple[float, ...],
                                          expected: float) -> None:
    pods = [pod(f"j-{i}", owner=OwnerRef("Job", "j", "juid"), created=t)
            for i, t in enumerate(pods_created)]
    out = build_gangs(pods, {}, {"ns/j": JobInfo("ns", "j", "juid", parallelism=2,
                                                 creation_time=job_created)}, GroupingConfig())
    (gang,) = out.pending
    assert gang.creation_time == expected
