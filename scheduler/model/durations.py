"""Durations and times as users write them in annotations.

One place for the forms gang-scheduler accepts, so the parser, the warning a malformed value
gets and the docs say the same thing (``ACCEPTED``). Users write what their other tools take:
plain seconds (``3600``), Go-style units (``90m``, ``2h``, ``1h30m``, ``1.5h``), days and weeks
(``1d``, ``2w``, ``1d12h``) and ISO 8601 durations (``PT2H``, ``P1DT2H30M``); times are RFC
3339 (``2026-11-30T09:00:00Z``, an offset instead of ``Z``, fractional seconds allowed).

Digits are ASCII only (``scheduler.model.numerals``), and a duration is at most
``MAX_DURATION_SECONDS``: an estimate of ``99999999999999999999d`` parses to a float, but every
time worked out from it (an expected end, a reservation's start) is beyond what a timestamp can
represent, and would fail wherever it is written or shown. A year is far beyond any estimate a
scheduler can act on, and far inside what every clock and format can represent.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import UTC, datetime

#: The accepted forms, as a warning or an error message names them.
ACCEPTED = "seconds (3600), 90m, 2h, 1h30m, 1d, 2w, or ISO 8601 (PT2H, P1DT2H30M)"
TIME_ACCEPTED = "an RFC 3339 time such as 2026-11-30T09:00:00Z"
#: The longest duration accepted (an expected runtime; a Queue's runtime and wait settings).
MAX_DURATION_SECONDS = 365 * 86400.0
MAX_DURATION = "365d"
#: How far ahead of the scheduler's clock a time a user's tool wrote (a last checkpoint) may
#: be and still be believed: clocks of different machines differ by seconds, not minutes.
CLOCK_SKEW_SECONDS = 300.0
#: The latest instant an RFC 3339 timestamp (and Python's ``datetime``) can say:
#: 9999-12-31T23:59:59Z.
LATEST_TIME = 253402300799.0



def format_duration(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3h05m``, ``2d04h``: how long, for people (rounded down).

    Every place that tells a person how long (a gang's age or ETA in the views and on the
    dashboard, ``explain``'s estimated start, a reason that names a wait) writes it here, so
    one gang reads "in 22m" everywhere, never "in 1334s" in one place and "22m" in another.
    ``>365d`` beyond ``MAX_DURATION_SECONDS`` (no estimate the scheduler works out can be
    longer: an absurd one is not shown as a 20-digit number of days); "-" for None or NaN
    (not known)."""
    if seconds is None or math.isnan(seconds):
        return "-"
    if seconds > MAX_DURATION_SECONDS:
        return f">{MAX_DURATION}"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def format_time(ts: float) -> str:
    """Epoch seconds -> RFC 3339 with second precision (``metav1.Time``); a time beyond what
    the format can represent is written as its nearest end (``representable``)."""
    return datetime.fromtimestamp(int(representable(ts)), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class OutOfBounds(ValueError):
    """A value that reads well but is beyond what the scheduler accepts; the message says
    the value and the bound (``ValueError`` otherwise: a value that cannot be read)."""


_UNIT_SECONDS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
_UNITS = re.compile(r"^(?:" + r"".join(f"(?:{_NUMBER}{u})?" for u in "wdhm")
                    + rf"(?:{_NUMBER}s?)?)$")
_ISO = re.compile(rf"^P(?:{_NUMBER}W)?(?:{_NUMBER}D)?"
                  rf"(?:T(?:{_NUMBER}H)?(?:{_NUMBER}M)?(?:{_NUMBER}S)?)?$")
_ISO_SECONDS = (604800.0, 86400.0, 3600.0, 60.0, 1.0)


@functools.lru_cache(maxsize=4096)  # the same few annotations, read on every gang rebuild
def parse_duration(text: str) -> float:
    """Seconds from any form in ``ACCEPTED``, at most ``MAX_DURATION_SECONDS``;
    ``ValueError`` names the text and the forms, or the bound."""
    value = text.strip()
    groups: tuple[str | None, ...] = ()
    weights: tuple[float, ...] = ()
    if not value.isascii():  # upper() makes "S" of "ſ": only ASCII text is read at all
        value = ""
    if match := _UNITS.match(value.lower()):
        groups, weights = match.groups(), tuple(_UNIT_SECONDS.values())
    elif (match := _ISO.match(value.upper())) and not value.upper().endswith("T"):
        groups, weights = match.groups(), _ISO_SECONDS
    if not value or not any(groups):
        raise ValueError(f"not a duration: {text!r} (accepted: {ACCEPTED})")
    seconds = sum(float(g) * w for g, w in zip(groups, weights, strict=True) if g)
    if not math.isfinite(seconds) or seconds > MAX_DURATION_SECONDS:
        raise OutOfBounds(f"{text!r} is more than {MAX_DURATION}, the longest duration the "
                          "scheduler accepts")
    return seconds


def parse_time(text: str) -> float:
    """Epoch seconds from an RFC 3339 time; ``ValueError`` names the text and the form.

    A time without an offset is refused rather than read in the scheduler's local zone: the
    same annotation would mean different instants on different machines.
    """
    value = text.strip()
    if not value.isascii():  # fromisoformat reads some non-ASCII digits too
        raise ValueError(f"not a time: {text!r} (expected {TIME_ACCEPTED}, in ASCII digits)")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {text!r} (expected {TIME_ACCEPTED})") from None
    if parsed.tzinfo is None:
        raise ValueError(f"not a time: {text!r} has no time zone (expected {TIME_ACCEPTED})")
    return parsed.timestamp()


def representable(ts: float) -> float:
    """*ts* (epoch seconds) within what a timestamp can say: 0 .. ``LATEST_TIME``, NaN as 0.

    Times the scheduler works out are bounded by its inputs' bounds; this is the last guard,
    wherever a time is written or shown, so that no value that slipped past them can fail a
    status write or a view."""
    if math.isnan(ts):
        return 0.0
    return min(max(ts, 0.0), LATEST_TIME)


def check_not_ahead(text: str, at: float, now: float) -> float:
    """*at* (read from *text*), unless it is more than ``CLOCK_SKEW_SECONDS`` ahead of *now*:
    then ``OutOfBounds`` says by how much."""
    if at > now + CLOCK_SKEW_SECONDS:
        raise OutOfBounds(f"{text!r} is {at - now:.0f}s ahead of the scheduler's clock (more "
                          f"than the {CLOCK_SKEW_SECONDS:.0f}s allowed for clock skew)")
    return at
