"""The gangscheduler.io annotations a user writes, checked: what is wrong with each, and the
forms that are accepted.

Why a check of its own: the grouping reads these annotations leniently (an estimate it cannot
read is treated as none, so the queue's default runtime applies), which keeps a typo from
blocking a job, but a lenient reader is a silent one. A user who wrote
``gangscheduler.io/expected-runtime: "soon"`` gets no backfill and a worse ETA and would never
know why. The edges turn these findings into a warning event on the object and a log line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scheduler.model.durations import ACCEPTED, TIME_ACCEPTED, parse_duration, parse_time
from scheduler.model.workloads import (
    EXPECTED_RUNTIME_ANNOTATION,
    LAST_CHECKPOINT_ANNOTATION,
    MIN_MEMBER_ANNOTATION,
)


def _positive_int(text: str) -> None:
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(text)


#: annotation -> (parser that raises ValueError, what is accepted, what happens meanwhile)
CHECKED: Mapping[str, tuple[Callable[[str], object], str, str]] = {
    EXPECTED_RUNTIME_ANNOTATION: (parse_duration, ACCEPTED,
                                  "treated as no estimate (the queue's default runtime "
                                  "applies, and backfill and ETAs cannot count on it)"),
    LAST_CHECKPOINT_ANNOTATION: (parse_time, TIME_ACCEPTED,
                                 "treated as never checkpointed (preemption counts all the "
                                 "gang's run time as lost)"),
    MIN_MEMBER_ANNOTATION: (_positive_int, "a positive integer such as 4",
                            "the gang size cannot be known from it"),
}


def annotation_problems(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """One message per checked annotation whose value cannot be read: its name, the value,
    the accepted forms and what the scheduler does instead. Empty when all are readable."""
    problems = []
    for key, (parse, accepted, meanwhile) in CHECKED.items():
        value = annotations.get(key)
        if value is None:
            continue
        try:
            parse(value)
        except ValueError:
            problems.append(f"annotation {key}: cannot read {value!r}; accepted: {accepted}; "
                            f"{meanwhile}")
    return tuple(problems)
