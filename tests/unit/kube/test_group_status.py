"""PodGroup phase follows its pods: Scheduled -> Running -> Finished, or Failed."""

from __future__ import annotations

import pytest

from scheduler.kube.write.group_sync import group_status
from scheduler.kube.write.status import PodGroupPhase
from scheduler.model import PodRequirements, Resources
from scheduler.model.workloads import PodInfo, PodPhase


def pods(*states: tuple[str, PodPhase]) -> list[PodInfo]:
    return [PodInfo(uid=f"u{i}", namespace="ns", name=f"p{i}",
                    requirements=PodRequirements(Resources.of(gpu=1)), node_name=node,
                    phase=phase, started_at=10.0 if node else None)
            for i, (node, phase) in enumerate(states)]


P, R, S, F = PodPhase.PENDING, PodPhase.RUNNING, PodPhase.SUCCEEDED, PodPhase.FAILED


@pytest.mark.parametrize("members,expected", [
    (pods(("", P), ("", P)), None),
    (pods(("n", P), ("n", P)), PodGroupPhase.SCHEDULED),
    (pods(("n", R), ("n", P)), PodGroupPhase.SCHEDULED),
    (pods(("n", R), ("n", R)), PodGroupPhase.RUNNING),
    (pods(("n", S), ("n", R)), PodGroupPhase.RUNNING),
    (pods(("n", S), ("n", S)), PodGroupPhase.FINISHED),
    (pods(("n", F), ("n", R)), PodGroupPhase.FAILED),
])
def test_phase(members: list[PodInfo], expected: PodGroupPhase | None) -> None:
    status = group_status(2, members)
    assert (status.phase if status else None) == expected


def test_counts_and_start_time() -> None:
    status = group_status(2, pods(("n", R), ("n", S), ("", P)))
    assert status is not None
    assert (status.scheduled, status.running, status.succeeded, status.failed) == (2, 1, 1, 0)
    assert status.schedule_start_time == 10.0
