"""The gangscheduler.io annotations a user writes, checked: what is wrong with each, and the
forms that are accepted.

Why a check of its own: the grouping reads these annotations leniently (an estimate it cannot
read is treated as none, so the queue's default runtime applies), which keeps a typo from
blocking a job, but a lenient reader is a silent one. A user who wrote
``gangscheduler.io/expected-runtime: "soon"`` gets no backfill and a worse ETA and would never
know why. A few labels are read the same way (``label_problems``: a notebook labelled
``gangscheduler.io/tier: interactve`` is batch work). The edges turn these findings into a
warning event on the object and a log line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import NamedTuple

from scheduler.model.durations import (
    ACCEPTED,
    TIME_ACCEPTED,
    OutOfBounds,
    check_not_ahead,
    parse_duration,
    parse_time,
)
from scheduler.model.numerals import parse_int
from scheduler.model.workloads import (
    EXPECTED_RUNTIME_ANNOTATION,
    LAST_CHECKPOINT_ANNOTATION,
    MAX_RUNTIME_ANNOTATION,
    MIN_MEMBER_ANNOTATION,
    RUNTIME_SECONDS_ANNOTATION,
    TIER_LABEL,
)


def _duration(text: str, now: float | None) -> object:
    return parse_duration(text)


def _positive_duration(text: str, now: float | None) -> object:
    if parse_duration(text) <= 0:
        raise ValueError(text)
    return None


def _seconds_ran(text: str, now: float | None) -> object:
    seconds = float(text)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(text)
    return seconds


def _checkpoint(text: str, now: float | None) -> object:
    at = parse_time(text)
    return at if now is None else check_not_ahead(text, at, now)


def _positive_int(text: str, now: float | None) -> object:
    if parse_int(text) < 1:
        raise ValueError(text)
    return None


class Check(NamedTuple):
    """How one annotation is read: a parser raising ``ValueError`` (``OutOfBounds`` for a
    value read but refused), given the time of the check when it depends on it (None:
    unknown, the checks against the clock are skipped); what is accepted; and what happens
    meanwhile."""

    parse: Callable[[str, float | None], object]
    accepted: str
    meanwhile: str


CHECKED: Mapping[str, Check] = {
    EXPECTED_RUNTIME_ANNOTATION: Check(_duration, ACCEPTED,
                                       "treated as no estimate (the queue's default runtime "
                                       "applies, and backfill and ETAs cannot count on it)"),
    MAX_RUNTIME_ANNOTATION: Check(_positive_duration, f"a duration above 0: {ACCEPTED}",
                                  "treated as no limit of the gang's own (its queue's "
                                  "maxRuntimeSeconds, if any, still applies)"),
    LAST_CHECKPOINT_ANNOTATION: Check(_checkpoint, TIME_ACCEPTED,
                                      "treated as never checkpointed (preemption counts all "
                                      "the gang's run time as lost)"),
    RUNTIME_SECONDS_ANNOTATION: Check(_seconds_ran, "seconds, a number from 0 such as 3612.5",
                                      "treated as 0 (a runtime limit counts this run only); "
                                      "the scheduler writes it anew when the run ends"),
    MIN_MEMBER_ANNOTATION: Check(_positive_int, "a positive integer such as 4",
                                 "the gang size cannot be known from it"),
}


def value_problem(key: str, value: str, now: float | None = None) -> str | None:
    """What is wrong with *value* of the checked annotation *key* (the value and the accepted
    forms, or the bound it breaks), None when it reads well or *key* is not checked.
    The one reading of each rule: the warnings (``annotation_problems``) and the admission
    webhook's refusals (``scheduler.feed.admission``) word it around this."""
    check = CHECKED.get(key)
    if check is None:
        return None
    try:
        check.parse(value, now)
    except OutOfBounds as exc:
        return str(exc)
    except ValueError:
        return f"cannot read {value!r}; accepted: {check.accepted}"
    return None


def annotation_problems(annotations: Mapping[str, str],
                        now: float | None = None) -> tuple[str, ...]:
    """One message per checked annotation whose value cannot be read, or is refused (beyond
    a bound; ahead of *now*, the time of the check): its name, the value, the accepted forms
    or the bound, and what the scheduler does instead. Empty when all are readable."""
    problems = []
    for key, check in CHECKED.items():
        value = annotations.get(key)
        if value is None:
            continue
        problem = value_problem(key, value, now)
        if problem is not None:
            problems.append(f"annotation {key}: {problem}; {check.meanwhile}")
    return tuple(problems)


#: The labels read leniently the same way: value -> None when it reads well, else what is
#: accepted; and what happens meanwhile.
LABELS_CHECKED: Mapping[str, tuple[frozenset[str], str]] = {
    TIER_LABEL: (frozenset({"interactive", "batch"}),
                 "treated as batch (considered after its queue's interactive gangs, and "
                 "preemptible by batch gangs of higher priority)"),
}


def label_problem(key: str, value: str) -> str | None:
    """What is wrong with a checked label's value (None: it reads well, or the label is not
    one the scheduler checks): the value and the accepted values."""
    checked = LABELS_CHECKED.get(key)
    if checked is None or value in checked[0]:
        return None
    return f"{value!r} is not one of {' | '.join(sorted(checked[0]))}"


def label_problems(labels: Mapping[str, str]) -> tuple[str, ...]:
    """One message per checked label whose value is not one the scheduler knows: the label,
    the value, the accepted values and what the scheduler does instead."""
    problems = []
    for key, (_, meanwhile) in LABELS_CHECKED.items():
        value = labels.get(key)
        problem = None if value is None else label_problem(key, value)
        if problem is not None:
            problems.append(f"label {key}: {problem}; {meanwhile}")
    return tuple(problems)
