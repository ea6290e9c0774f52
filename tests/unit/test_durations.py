"""One duration formatter (scheduler/durations.py) for everything a person reads.

Issue 32: ``explain`` printed "in 1334s" where the views said 22m for the same gang. The
table pins the format; the second test sends one ETA through every place that writes one.
"""

from __future__ import annotations

import dataclasses

import pytest
from rich.console import Console

from policies.reservation import Reservation
from scheduler.cli.explain import describe_estimate
from scheduler.decide import plan as plan_module
from scheduler.decide.plan import CyclePlan
from scheduler.model.durations import format_duration
from scheduler.views import html, live, text
from tests.unit.test_views import scene

NOW = 1_714_564_800.0
ETA = 1334.0  # the gang: 22 minutes and 14 seconds away


@pytest.mark.parametrize(("seconds", "written"), [
    (None, "-"), (0, "0s"), (59.9, "59s"), (60, "1m"), (ETA, "22m"), (3599, "59m"),
    (3600, "1h00m"), (3 * 3600 + 5 * 60, "3h05m"), (86399, "23h59m"), (86400, "1d00h"),
    (2 * 86400 + 4 * 3600 + 59, "2d04h"),
])
def test_format_duration(seconds: float | None, written: str) -> None:
    assert format_duration(seconds) == written


def test_every_place_writes_one_eta_the_same_way() -> None:
    view = scene()
    (row,) = view.pending
    eta_view = dataclasses.replace(view, now=NOW,
                                   pending=(dataclasses.replace(row, eta_seconds=ETA),))
    console = Console(record=True, width=200, color_system=None)
    console.print(text.top(eta_view))
    reserved = CyclePlan(NOW, reservations=(Reservation(row.id, ("n1",), NOW + ETA),))
    recent = live.Recent()
    recent.observe(reserved)
    written = {
        "explain": describe_estimate(NOW + ETA, NOW),
        "plan explain": plan_module.explain(reserved, row.id),
        "top": console.export_text(),
        "dashboard": html.render(eta_view),
        "recent reservations": recent.events[0].message,
    }
    assert {k: "22m" in v and "1334" not in v for k, v in written.items()} == dict.fromkeys(
        written, True), written
