"""``explain``'s "last failures" section: how each rank of a gang last failed, and what its
Job's backoff does next.

Why: a Job stuck in a backoff loop has, between attempts, no pods running or pending; the
question is why its pods keep failing (exit 1? OOMKilled? evicted?) and how many more times
the Job controller will try. The records come from the cache (``feed.cache_failures``), the
Job's counts and rules from ``model.job_backoff``; this module only words them. Preempted or
evicted pods are said to be so, never shown as a crash of the user's code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scheduler.model import job_backoff
from scheduler.model.durations import format_duration, format_time
from scheduler.model.failures import Failure, FailureKind
from scheduler.model.numerals import is_digits
from scheduler.model.workloads import JobInfo


def what_happened(failure: Failure) -> str:
    """``exit code 1 (Error) in container trainer``, ``OOMKilled (exit code 137) ...``,
    ``preempted (PreemptionByScheduler): not a failure of its code``."""
    where = (f" in {'init container' if failure.init_container else 'container'} "
             f"{failure.container}" if failure.container else "")
    code = f"exit code {failure.exit_code}" if failure.exit_code is not None else ""
    reason = f" ({failure.reason})" if failure.reason else ""
    if failure.kind is FailureKind.CRASHED:
        return f"{code}{reason}{where}"
    if failure.kind is FailureKind.OOM_KILLED:
        return f"OOMKilled{f' ({code})' if code else ''}{where}"
    if failure.disrupted:
        return f"{failure.kind}{reason}: not a failure of its code"
    if failure.kind is FailureKind.DEADLINE:
        return f"deadline exceeded{reason}"
    return (f"failed{reason}{f', {code}' if code else ''}{where}" if reason or code
            else "failed; its status gives no exit code or reason")


def _when(failure: Failure, now: float) -> str:
    if failure.finished_at is None:
        return "at an unknown time"
    return f"{format_duration(max(0.0, now - failure.finished_at))} ago"


def _rank_order(rank: str) -> tuple[int, int, str]:
    return (0, int(rank), "") if is_digits(rank) else (1, 0, rank)


def _next(job: JobInfo, failure: Failure, last: float, now: float) -> str:
    """When the Job controller makes the rank's pod again, as far as its backoff says."""
    at = job_backoff.next_pods_at(job, failure, last)
    if at is None:
        return ""
    if at <= now:
        return "its backoff is over: the Job controller makes its pod again now"
    return (f"the Job controller makes its pod again in ~{format_duration(at - now)} "
            f"(not before {format_time(at)})")


def _retries(job: JobInfo, failure: Failure) -> str:
    """What the backoff limit does after *failure*, in the order things happen: the pod
    about to come back is retry k of the limit, and whether another failure ends it all.
    ("0 retries left" while a retry is on its way read as "no more tries".)"""
    counted = job_backoff.retries(job, failure)
    if counted.final:
        return f"no retry: {counted.final}"
    whom = (f"rank {failure.index}" if counted.per_index and failure.index is not None
            else "the Job")
    if not counted.used:  # (a failure its podFailurePolicy ignores)
        return (f"not counted: all {counted.limit} retries of {counted.limit_name} "
                "are left")
    after = (f"the last: one more failure fails {whom}" if not counted.left
             else f"{counted.left} more after it")
    return (f"retry {counted.used} of {counted.limit_name} {counted.limit} comes next "
            f"({after})")


def failures_text(failures: Sequence[Failure], job_of: Callable[[str], JobInfo | None],
                  now: float) -> str:
    """The section for a gang's *failures* (newest first, as the cache keeps them); *job_of*
    finds a failure's Job by name. "" when there are none; else it starts with a blank line,
    to follow a report."""
    if not failures:
        return ""
    newest: dict[str, Failure] = {}
    for failure in failures:
        newest.setdefault(failure.rank, failure)
    shown = sorted(newest.values(), key=lambda f: _rank_order(f.rank))
    earlier = len(failures) - len(shown)
    head = "last failures (newest per rank"
    head += f"; {earlier} earlier kept)" if earlier else ")"
    lines = ["", "", head + ":"]
    last = max((f.finished_at for f in failures if f.finished_at is not None), default=now)
    job_wide: list[tuple[JobInfo, Failure]] = []
    for failure in shown:
        label = f"rank {failure.rank}" if failure.rank != failure.pod else "pod"
        lines.append(f"  {label}: {what_happened(failure)}, {_when(failure, now)} "
                     f"(pod {failure.pod})")
        if failure.message:
            lines.append(f"    message: {failure.message}")
        job = job_of(failure.job) if failure.job else None
        if job is None:
            continue
        if job.backoff_limit_per_index is None:
            if all(j.key != job.key for j, _ in job_wide):
                job_wide.append((job, failure))
            continue
        lines.append(f"    {_retries(job, failure)}")
        if then := _next(job, failure, last, now):
            lines.append(f"    {then}")
    for job, failure in job_wide:
        lines.append(f"  Job {job.key}: {_retries(job, failure)}")
        if then := _next(job, failure, last, now):
            lines.append(f"    {then.replace('its pod', 'its pods')}")
    return "\n".join(lines)
