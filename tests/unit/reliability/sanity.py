"""What "no absurd value" means where people read times: shared by the unit and live fuzzing.

An estimate, an ETA or an age is finite and at most a little over ``MAX_DURATION_SECONDS``
(the longest duration the scheduler accepts: every time it works out is bounded by it), and
shown as ``format_duration`` shows one, in the views and in ``explain``; the views render.
"""

from __future__ import annotations

import io
import math
import re

from rich.console import Console

from scheduler.model.durations import MAX_DURATION_SECONDS, format_duration
from scheduler.views import html, text
from scheduler.views.state import ClusterView

#: The longest ETA a view may show: a release at most MAX_DURATION after a gang's start.
LONGEST_ETA = MAX_DURATION_SECONDS + 3600.0
#: An age or ETA as people read it (``format_duration``), at most a year and a bit.
_TIME = r"-|>365d|-?[0-9]{1,2}s|[0-9]{1,2}m|[0-9]{1,2}h[0-9]{2}m|[0-9]{1,3}d[0-9]{2}h"
_SHOWN_TIME = re.compile(_TIME)
#: A time ``explain`` says is ahead ("in 22m"): anything else after "in " is absurd.
_IN = re.compile(r"\bin (>?-?[0-9][0-9.e+]*[smhd][0-9smhd]*)")


def estimate(at: float | None, now: float, what: str) -> None:
    """*at* (epoch seconds, None: none) is not beyond what the scheduler can work out."""
    if at is not None:
        assert math.isfinite(at) and at - now <= LONGEST_ETA + 60, f"{what}: {at}"


def view(rows: ClusterView) -> None:
    """Every ETA and age finite, within a year and shown as such; the views render."""
    for row in (*rows.pending, *rows.running):
        for value in (row.eta_seconds, row.age_seconds):
            assert value is None or (math.isfinite(value) and abs(value) <= LONGEST_ETA), row
            assert _SHOWN_TIME.fullmatch(format_duration(value)), (value, format_duration(value))
    Console(file=io.StringIO(), width=240).print(text.top(rows))
    html.render(rows)


def explained(said: str) -> None:
    """Every duration ``explain`` says is ahead ("in 22m") is one ``format_duration``
    writes: within a year, never a 20-digit count."""
    for shown in _IN.findall(said):
        assert _SHOWN_TIME.fullmatch(shown), said
