"""Where an elastic gang's minimum and maximum come from: the pods present are its maximum
(a Job's parallelism); its minimum is the PodGroup's minMember or the min-member annotation.
A running gang knows both, and which member runs where, only when it is elastic."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.model.workloads import POD_GROUP_LABEL, PodGroupInfo, PodInfo
from tests.unit.elastic.helpers import NODES, grouped, job_pods

N0, N1, N2, N3 = (n.name for n in NODES)


@dataclass(frozen=True)
class Case:
    name: str
    pods: list[PodInfo]
    #: The running gang's minimum (None: not elastic) and its members' nodes.
    minimum: int | None
    nodes: tuple[str, ...] = ()
    #: The pending gang's (required, size), if any.
    pending: tuple[int, int] | None = None
    group: PodGroupInfo | None = None


def _in_group(pods: list[PodInfo]) -> list[PodInfo]:
    return [replace(p, owner=None, labels={**p.labels, POD_GROUP_LABEL: "g"}) for p in pods]


CASES = [
    Case("a Job with the annotation below its parallelism",
         job_pods("e", [N0, N1, None, None], min_member="2"), 2, (N0, N1), (0, 2)),
    Case("every member bound: still elastic, members above the minimum may go",
         job_pods("e", [N0, N1, N2, N3], min_member="2"), 2, (N0, N1, N2, N3)),
    Case("a Job without the annotation: all of it is required",
         job_pods("e", [N0, N1, N2, N3]), None),
    Case("the annotation at the parallelism: not elastic",
         job_pods("e", [N0, N1, N2, N3], min_member="4"), None),
    Case("a PodGroup's minMember below the pods present",
         _in_group(job_pods("g", [N0, N1, N2])), 2, (N0, N1, N2),
         group=PodGroupInfo("ns", "g", min_member=2)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_sources(case: Case) -> None:
    if case.group is not None:
        gangs = build_gangs(case.pods, {"ns/g": case.group}, {}, GroupingConfig())
    else:
        gangs = grouped(case.pods, {"e": len(case.pods)})
    (rg,) = gangs.running
    assert rg.min_member == case.minimum
    assert tuple(n for _, n in rg.pod_nodes) == case.nodes
    got = {g.id: (g.min_member, g.size) for g in gangs.pending}
    assert got == ({rg.id: case.pending} if case.pending else {})


def test_a_bad_annotation_names_itself() -> None:
    gangs = grouped(job_pods("e", [None] * 4, min_member="two"), {"e": 4})
    assert "gangscheduler.io/min-member: not an integer: 'two'" in gangs.problems["ns/e"]
