"""Durations and times as users write them in annotations.

One place for the forms gang-scheduler accepts, so the parser, the warning a malformed value
gets and the docs say the same thing (``ACCEPTED``). Users write what their other tools take:
plain seconds (``3600``), Go-style units (``90m``, ``2h``, ``1h30m``, ``1.5h``), days and weeks
(``1d``, ``2w``, ``1d12h``) and ISO 8601 durations (``PT2H``, ``P1DT2H30M``); times are RFC
3339 (``2026-11-30T09:00:00Z``, an offset instead of ``Z``, fractional seconds allowed).
"""

from __future__ import annotations

import functools
import math
import re
from datetime import datetime

#: The accepted forms, as a warning or an error message names them.
ACCEPTED = "seconds (3600), 90m, 2h, 1h30m, 1d, 2w, or ISO 8601 (PT2H, P1DT2H30M)"
TIME_ACCEPTED = "an RFC 3339 time such as 2026-11-30T09:00:00Z"

_UNIT_SECONDS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_NUMBER = r"(\d+(?:\.\d+)?)"
_UNITS = re.compile(r"^(?:" + r"".join(f"(?:{_NUMBER}{u})?" for u in "wdhm")
                    + rf"(?:{_NUMBER}s?)?)$")
_ISO = re.compile(rf"^P(?:{_NUMBER}W)?(?:{_NUMBER}D)?"
                  rf"(?:T(?:{_NUMBER}H)?(?:{_NUMBER}M)?(?:{_NUMBER}S)?)?$")
_ISO_SECONDS = (604800.0, 86400.0, 3600.0, 60.0, 1.0)


@functools.lru_cache(maxsize=4096)  # the same few annotations, read on every gang rebuild
def parse_duration(text: str) -> float:
    """Seconds from any form in ``ACCEPTED``; ``ValueError`` names the text and the forms."""
    value = text.strip()
    groups: tuple[str | None, ...] = ()
    weights: tuple[float, ...] = ()
    if match := _UNITS.match(value.lower()):
        groups, weights = match.groups(), tuple(_UNIT_SECONDS.values())
    elif (match := _ISO.match(value.upper())) and not value.upper().endswith("T"):
        groups, weights = match.groups(), _ISO_SECONDS
    if not value or not any(groups):
        raise ValueError(f"not a duration: {text!r} (accepted: {ACCEPTED})")
    seconds = sum(float(g) * w for g, w in zip(groups, weights, strict=True) if g)
    if not math.isfinite(seconds):
        raise ValueError(f"not a duration: {text!r} (too large)")
    return seconds


def parse_time(text: str) -> float:
    """Epoch seconds from an RFC 3339 time; ``ValueError`` names the text and the form.

    A time without an offset is refused rather than read in the scheduler's local zone: the
    same annotation would mean different instants on different machines.
    """
    value = text.strip()
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {text!r} (expected {TIME_ACCEPTED})") from None
    if parsed.tzinfo is None:
        raise ValueError(f"not a time: {text!r} has no time zone (expected {TIME_ACCEPTED})")
    return parsed.timestamp()
