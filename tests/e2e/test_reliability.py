"""The reliability suite: faults injected into a running scheduler pair, the invariants
checked after each (``tests/e2e/reliability.py`` says which and how).

The short version runs in CI with the other e2e tests: one fault of each kind and a few
SIGKILLs. The full version (100 SIGKILLs mid-bind, 10 of each other fault) and the apiserver
storm (kube-apiserver SIGKILLed mid-bind every 2-4 rounds) are behind the ``reliability``
marker, excluded from the default run; one command runs them and prints the figures
(docs/operations.md, "Reliability suite")::

    .venv/bin/pytest -m reliability -s tests/e2e/test_reliability.py

"Every Job completes" also depends on kwok, the kubelet stand-in, which drops a write the
killed apiserver never answered: a pod start of two writes once left 2 pods Running forever
(CI at da3f7e3). Each kwok stage is now one write, and kwok's re-list after an apiserver
restart replays a lost one. An etcd restart does not make kwok re-list, so a write it loses
then (a pod left Running past its runtime: ``g1`` at 7cb69f3) is replayed by the rig's kwok
resync, which the figures count (``scheduler/tools/devcluster/README.md``, "kwok drops a write that
fails mid-request").
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from scheduler.kube.lead.fence import LEADER_ANNOTATION, LEASE_ANNOTATION, TERM_ANNOTATION
from tests.e2e import reliability
from tests.e2e.conftest import SKIP_REASON, e2e_disabled

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(e2e_disabled(), reason=SKIP_REASON)]


def assert_reliable(figures: reliability.Figures, faults: int) -> None:
    assert figures.violations == [], figures.report()
    assert sum(figures.faults.values()) == faults
    assert len(figures.recoveries) == faults, figures.report()
    assert figures.stale == 0, figures.report()
    # Every fault of the rig is transient: none may cost a pod.
    assert figures.deleted_by_cause == {} and figures.released_seen == [], figures.report()


def test_the_storm_restarts_the_apiserver_every_two_to_four_rounds() -> None:
    faults = reliability.storm(60)
    struck = [i for i, f in enumerate(faults) if f != "none"]
    assert set(faults) == {"none", "apiserver-bind"} and struck[0] <= 3
    assert {b - a for a, b in itertools.pairwise(struck)} <= {2, 3, 4}
    assert 60 - struck[-1] <= 4 and faults == reliability.storm(60)


def test_a_live_pod_deleted_counts_and_a_finished_one_does_not(tmp_path: Path) -> None:
    """The deletion figures, on the watch's records and a replica's log (no cluster): a pod
    released by a rollback carries DisruptionTarget (GangRolledBack); one deleted by another
    controller (the Job controller's surplus) is counted apart."""
    def version(phase: str, deleting: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "p"}
        if deleting:
            meta["deletionTimestamp"] = "2026-12-04T10:00:00Z"
        return {"metadata": meta, "spec": {}, "status": {"phase": phase}}

    versions = {"live": [version("Running", False), version("Running", True),
                         version("Failed", True)],
                "done": [version("Running", False), version("Succeeded", False),
                         version("Succeeded", True)],
                "kept": [version("Running", False)],
                "vanished": [version("Pending", False)]}  # deleted while the watch was down
    assert reliability.deleted_live(versions) == ["live"]
    assert reliability.deleted_live(versions, {"vanished", "done"}) == ["live", "vanished"]
    assert not reliability.released(versions["live"])
    versions["live"][1]["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "GangRolledBack"}]
    assert reliability.released(versions["live"])
    log = tmp_path / "scheduler-a-1.log"
    log.write_text("\n".join([
        '{"event": "pods_deleted", "cause": "NoRoom", "pods": 3}', "not json",
        '{"event": "pods_deleted", "cause": "MemberGone", "pods": 1}',
        '{"event": "pods_deleted", "cause": "NoRoom", "pods": 2}',
        '{"event": "partial_gang_rolled_back", "cause": "NoRoom", "pods": 9}']))
    assert reliability.deletions_logged(log) == {"NoRoom": 5, "MemberGone": 1}


def test_the_stale_write_check_catches_a_bind_by_the_paused_term_seen_after_the_takeover(
        ) -> None:
    """The check of the ``pause`` rounds, on the watch's records (no cluster): a pod bound by
    the paused term and first seen bound after the standby took over is stale, as ``g54``'s
    member was in the last red run, whatever the paused replica logged; one seen before the
    takeover, one bound by the new term, and one of another Lease are not."""
    lease, paused = "lease-ns/reliability", ("a", "3")

    def bound(name: str, holder: str, term: str, on: str = lease) -> list[dict[str, Any]]:
        stamp = {LEADER_ANNOTATION: holder, TERM_ANNOTATION: term, LEASE_ANNOTATION: on}
        return [{"metadata": {"name": name, "labels": {reliability.JOB_LABEL: "g54"}},
                 "spec": {}},
                {"metadata": {"name": name, "annotations": stamp,
                              "labels": {reliability.JOB_LABEL: "g54"}},
                 "spec": {"nodeName": "n1"}}]

    versions = {"g54-0-x": bound("g54-0-x", "a", "3"), "g54-1-y": bound("g54-1-y", "a", "3"),
                "g54-2-z": bound("g54-2-z", "b", "4"),
                "g54-3-w": bound("g54-3-w", "a", "3", on="other/lease")}
    first = {"g54-0-x": 10.0, "g54-1-y": 20.0, "g54-2-z": 20.0, "g54-3-w": 20.0}
    assert reliability.stamped_bound_after(first, versions, paused, lease, 15.0) == [
        ("g54-1-y", "g54")]
    assert reliability.stamped_bound_after(first, versions, paused, lease, 25.0) == []


def test_a_member_that_succeeded_and_was_removed_still_counts_towards_the_whole_gang(
        ) -> None:
    """The round's "gang whole" check, on pod records (no cluster), as run 15 at a74bbb5 had
    them: Job ``g6`` of 6 complete, 5 pods left (its 6th succeeded as a rollback deleted it).
    Bound members that have not finished count once, whether the Job counted them yet or not."""
    def pod(phase: str, node: str | None = "n1", deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "p"}
        if deleting:
            meta["deletionTimestamp"] = "2026-12-02T16:23:41Z"
        return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}

    assert reliability.members_done([pod("Succeeded")] * 5, succeeded=6) == 6
    assert reliability.members_done([pod("Succeeded")] * 5, succeeded=4) == 5  # not counted yet
    assert reliability.members_done([pod("Running")] * 2 + [pod("Succeeded")] * 3,
                                    succeeded=4) == 6
    assert reliability.members_done([pod("Pending", node=None)] * 6, succeeded=0) == 0
    assert reliability.members_done([pod("Running", deleting=True)] * 6, succeeded=0) == 0


def test_every_fault_once_leaves_no_gang_partly_bound_and_loses_nothing(
        tmp_path: Path) -> None:
    faults = ["kill", "apiserver", "kill", "etcd", "cut", "pause", "kill"]
    figures = reliability.run(tmp_path, faults)
    assert_reliable(figures, len(faults))
    assert figures.faults["pause"] == 1


@pytest.mark.reliability
@pytest.mark.timeout(4 * 3600)  # 140 rounds: 20-45 minutes on a loaded 2-core machine
def test_the_full_run(tmp_path: Path) -> None:
    kills = int(os.environ.get("GANG_SCHEDULER_RELIABILITY_KILLS", "100"))
    others = int(os.environ.get("GANG_SCHEDULER_RELIABILITY_OTHERS", "10"))
    faults = reliability.schedule(kills, others)
    figures = reliability.run(tmp_path, faults)
    assert_reliable(figures, len(faults))


@pytest.mark.reliability
@pytest.mark.timeout(2 * 3600)
def test_an_apiserver_storm_costs_no_pod(tmp_path: Path) -> None:
    """kube-apiserver SIGKILLed mid-bind every 2-4 rounds: every partly bound gang is finished
    once it answers again, none rolled back."""
    rounds = int(os.environ.get("GANG_SCHEDULER_RELIABILITY_STORM_ROUNDS", "60"))
    faults = reliability.storm(rounds)
    figures = reliability.run(tmp_path, faults)
    assert_reliable(figures, sum(1 for f in faults if f != "none"))
