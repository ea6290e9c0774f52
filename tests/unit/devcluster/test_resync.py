"""Which pods the kwok resync touches (``scheduler.tools.devcluster.resync.overdue``): those whose
next kwok stage is overdue by more than the grace period, and no other. A touch of a pod
kwok is about to handle anyway is harmless; a stuck pod left untouched is a Job that never
completes (the reliability rig's ``g1`` at 7cb69f3)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler.tools.devcluster import kwok, resync

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def stamp(offset_s: float) -> str:
    """An RFC 3339 time *offset_s* from NOW, with kwok's nine fraction digits."""
    t = datetime.fromtimestamp(NOW + offset_s, tz=UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}000Z"


def pod(phase: str, node: str | None = "n1", created: float = -600.0,
        notes: dict[str, str] | None = None, deleting: float | None = None,
        grace: int = 30) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "creationTimestamp": stamp(created).split(".")[0] + "Z",
                            "annotations": notes or {}}
    if deleting is not None:
        meta["deletionTimestamp"] = stamp(deleting).split(".")[0] + "Z"
        meta["deletionGracePeriodSeconds"] = grace
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def running(started: float, runtime: str) -> dict[str, str]:
    return {kwok.SIMULATED_STARTED_AT: stamp(started), kwok.SIMULATED_RUNTIME: runtime}


@pytest.mark.parametrize(("case", "obj", "stage"), [
    # g1's pod: Running, its 2.4 s run ended minutes ago: the exit was lost.
    ("exit lost", pod("Running", notes=running(-300, "2.4")), "pod-exit"),
    ("exit due within the grace", pod("Running", notes=running(-8, "2.4")), None),
    ("still running", pod("Running", notes=running(-5, "3600")), None),
    ("runs until deleted", pod("Running", notes={kwok.SIMULATED_STARTED_AT: stamp(-900)}), None),
    ("malformed runtime", pod("Running", notes=running(-900, "soon")), None),
    ("negative runtime", pod("Running", notes=running(-900, "-1")), None),
    ("no start stamp", pod("Running", notes={kwok.SIMULATED_RUNTIME: "1"}), None),
    ("start lost", pod("Pending"), "pod-start"),
    ("just created", pod("Pending", created=-3), None),
    ("not bound", pod("Pending", node=None), None),
    ("termination lost", pod("Running", deleting=-60), "pod-terminate"),
    ("grace period not over", pod("Running", deleting=20), None),
    # Deleted 30 s ago with a 35 s grace period and a 2 s shutdown: it should have exited.
    ("shutdown lost", pod("Running", deleting=5, grace=35,
                          notes={kwok.SIMULATED_SHUTDOWN: "2"}), "pod-terminate"),
    ("removal lost", pod("Failed", deleting=-60, grace=0), "pod-remove"),
    ("removal due", pod("Succeeded", deleting=-5, grace=0), None),
    ("finished, kept", pod("Succeeded", notes=running(-900, "1")), None),
])
def test_overdue(case: str, obj: dict[str, Any], stage: str | None) -> None:
    assert resync.overdue(obj, NOW) == stage, case


def test_times_parse_as_the_apiserver_and_kwok_write_them() -> None:
    assert resync.epoch(stamp(0)) == pytest.approx(NOW)
    assert resync.epoch(stamp(0.25)) == pytest.approx(NOW + 0.25)
    assert resync.epoch("2027-01-15T08:00:00Z") == NOW
    assert resync.epoch("yesterday") is None
    assert resync.epoch(None) is None
