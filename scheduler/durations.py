"""One way to write a duration for people: ``45s``, ``12m``, ``3h05m``, ``2d04h``.

Every place that tells a person how long (a gang's age or ETA in the views and on the
dashboard, ``explain``'s estimated start, a reason that names a wait) writes it with
``format_duration``, so one gang reads "in 22m" everywhere, never "in 1334s" in one place and
"22m" in another. Standard library only: the decision core's texts use it too.
"""

from __future__ import annotations


def format_duration(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3h05m``, ``2d04h`` (rounded down; "-" for None: not known)."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"
