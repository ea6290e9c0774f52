"""Numbers read from text users write (annotations, labels, Queue fields, flags): ASCII only.

Why a rule of its own: Python's ``int()``, ``float()``, ``str.isdigit()`` and the regex ``\\d``
take every Unicode decimal digit, so a full-width ``"３h"`` or an Arabic-Indic ``"٣"`` reads as
3 here while ``kubectl``, Go's ``strconv`` and the apiserver refuse it. A value the scheduler
reads differently from every other tool is a silent choice; every number it parses from text
goes through these functions (or, where a regular expression is the parser, ``[0-9]``), so
such a value is refused with the reason the caller reports.
"""

from __future__ import annotations

import re

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DIGITS = re.compile(r"[0-9]+")


def is_digits(text: str) -> bool:
    """Is *text* one or more ASCII digits (no sign, no space)?"""
    return _DIGITS.fullmatch(text) is not None


def parse_int(text: str) -> int:
    """A whole number written in ASCII digits (an optional sign, surrounding spaces allowed);
    ``ValueError`` names the text otherwise."""
    value = text.strip()
    if not _INTEGER.fullmatch(value):
        raise ValueError(f"not a whole number in ASCII digits: {text!r}")
    return int(value)


def parse_float(text: str) -> float:
    """``float(text)``, but only for ASCII text: ``ValueError`` for ``"１.５"`` as for ``"x"``.
    (``inf`` and ``nan`` still parse: callers that need a finite value say so.)"""
    if not text.isascii():
        raise ValueError(f"not a number in ASCII digits: {text!r}")
    return float(text)
