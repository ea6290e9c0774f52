"""Argument types and file checks shared by the subcommands.

A bad flag value is reported by argparse as ``argument --price: must be a finite number >= 0,
got 'nan'`` (exit code 2) before anything is loaded or started; ``float('nan')`` and
``float('inf')`` parse, so every float flag goes through one of these. Digits are ASCII only
(``scheduler.model.numerals``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
from collections.abc import Callable
from pathlib import Path

from scheduler.model.numerals import parse_float, parse_int


def number(*, minimum: float = 0.0, positive: bool = False) -> Callable[[str], float]:
    """A finite float >= *minimum* (> *minimum* when *positive*)."""
    bound = f"> {minimum:g}" if positive else f">= {minimum:g}"

    def parse(text: str) -> float:
        try:
            value = parse_float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < minimum or (positive and value == minimum):
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text!r}")
        return value

    return parse


def integer(*, minimum: int) -> Callable[[str], int]:
    """A whole number >= *minimum*."""

    def parse(text: str) -> int:
        try:
            value = parse_int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be a whole number >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}")
        return value

    return parse


def iso_date(text: str) -> dt.date:
    """A calendar date written YYYY-MM-DD."""
    try:
        if len(text) == 10 and text.isascii():
            return dt.date.fromisoformat(text)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be a date YYYY-MM-DD, got {text!r}")


def output_file_problem(path: Path) -> str | None:
    """Why *path* cannot be written as an output file, or None when it can."""
    if path.is_dir():
        return "it is a directory"
    if not path.parent.is_dir():
        return f"its directory {path.parent} does not exist"
    return None


def output_dir_problem(path: Path) -> str | None:
    """Why *path* cannot be (created as) an output directory, or None when it can."""
    for parent in (path, *path.parents):
        if parent.exists():
            if not parent.is_dir():
                return ("it exists and is not a directory" if parent == path
                        else f"{parent} is a file, not a directory")
            return None
    return None
