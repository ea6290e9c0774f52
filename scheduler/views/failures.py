"""How a gang's last failures are worded, for ``explain`` and for every view (issue 39).

Why here: ``explain`` (``scheduler.cli``) and the views (text tables, the dashboard, the
JSON of ``/api/v1/state``) must say the same thing of one failure, and the views layer is
the lowest both may import. The records come from the cache (``feed.cache_failures``: live,
or built from the failed pods a caller may list); what a Job's backoff leaves from
``model.job_backoff``; this module only words them, once: ``what_happened`` (one rank's
failure in full), ``short`` (the same in a word or two, for a table cell), the retries and
when a pod comes back. Preempted or evicted pods are said to be so, never shown as a crash
of the user's code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from scheduler.model import job_backoff
from scheduler.model.durations import format_duration, format_time
from scheduler.model.failures import Failure, FailureKind
from scheduler.model.numerals import is_digits
from scheduler.model.workloads import JobInfo
from scheduler.views.state import FailureRow, GangFailures, GangRow, JobRetriesRow


class FailureSource(Protocol):
    """Where the views read failures (``ClusterCache`` is one)."""

    def failures(self, gang_id: str) -> tuple[Failure, ...]: ...

    def failed_gangs(self) -> tuple[str, ...]: ...

    def job(self, key: str) -> JobInfo | None: ...

    def queue_of(self, gang_id: str) -> str: ...


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


def short(failure: Failure) -> str:
    """``what_happened`` in a word or two: ``OOMKilled``, ``exit 1``, ``preempted``,
    ``evicted``, ``node lost``, ``deadline exceeded``, ``failed``."""
    if failure.kind is FailureKind.CRASHED and failure.exit_code is not None:
        return f"exit {failure.exit_code}"
    if failure.kind is FailureKind.UNKNOWN and failure.reason:
        return f"failed ({failure.reason})"
    return str(failure.kind)


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


def gang_failures(failures: Sequence[Failure], job_of: Callable[[str], JobInfo | None],
                  now: float) -> GangFailures | None:
    """A gang's *failures* (newest first, as the cache keeps them) as rows: the newest per
    rank, in rank order, with what each Job's backoff does next; *job_of* finds a failure's
    Job by name. None without failures."""
    if not failures:
        return None
    newest: dict[str, Failure] = {}
    for failure in failures:
        newest.setdefault(failure.rank, failure)
    shown = sorted(newest.values(), key=lambda f: _rank_order(f.rank))
    last = max((f.finished_at for f in failures if f.finished_at is not None), default=now)
    rows: list[FailureRow] = []
    jobs: list[JobRetriesRow] = []
    for failure in shown:
        job = job_of(failure.job) if failure.job else None
        retries = then = ""
        if job is not None and job.backoff_limit_per_index is not None:
            retries, then = _retries(job, failure), _next(job, failure, last, now)
        elif job is not None and all(j.job != job.key for j in jobs):
            jobs.append(JobRetriesRow(job.key, _retries(job, failure),
                                      _next(job, failure, last, now).replace("its pod",
                                                                             "its pods")))
        rows.append(FailureRow(
            rank=failure.rank if failure.rank != failure.pod else "", pod=failure.pod,
            kind=str(failure.kind), disrupted=failure.disrupted, what=what_happened(failure),
            short=short(failure),
            age_seconds=(None if failure.finished_at is None
                         else max(0.0, now - failure.finished_at)),
            message=failure.message, retries=retries, next=then))
    return GangFailures(summary(rows), tuple(rows), len(failures) - len(rows), tuple(jobs))


def _who(row: FailureRow) -> str:
    return f"rank {row.rank}" if row.rank else f"pod {row.pod}"


def _ago(age: float | None) -> str:
    return "at an unknown time" if age is None else f"{format_duration(age)} ago"


def summary(rows: Sequence[FailureRow]) -> str:
    """The gang's last failure for a table cell: ``rank 3: OOMKilled 2m ago``, ``2 ranks
    failed: exit 1, newest 40s ago``, ``2 ranks preempted, newest 1m ago``."""
    if not rows:
        return ""
    ages = [r.age_seconds for r in rows if r.age_seconds is not None]
    if len(rows) == 1:
        (row,) = rows
        return f"{_who(row)}: {row.short}" + (f" {_ago(row.age_seconds)}" if ages else "")
    newest = f", newest {_ago(min(ages))}" if ages else ""
    words = list(dict.fromkeys(r.short for r in rows))
    if len(words) > 1:
        return f"{len(rows)} ranks: {', '.join(words)}{newest}"
    if all(r.disrupted for r in rows):
        return f"{len(rows)} ranks {words[0]}{newest}"
    return f"{len(rows)} ranks failed: {words[0]}{newest}"


def detail_lines(found: GangFailures) -> list[str]:
    """The full per-rank list, as ``explain`` prints it (two spaces per level)."""
    head = "last failures (newest per rank"
    head += f"; {found.earlier} earlier kept)" if found.earlier else ")"
    lines = [head + ":"]
    for row in found.ranks:
        label = f"rank {row.rank}" if row.rank else "pod"
        lines.append(f"  {label}: {row.what}, {_ago(row.age_seconds)} (pod {row.pod})")
        if row.message:
            lines.append(f"    message: {row.message}")
        lines += [f"    {text}" for text in (row.retries, row.next) if text]
    for job in found.jobs:
        lines.append(f"  Job {job.job}: {job.retries}")
        if job.next:
            lines.append(f"    {job.next}")
    return lines


def failures_text(failures: Sequence[Failure], job_of: Callable[[str], JobInfo | None],
                  now: float) -> str:
    """``explain``'s section for a gang's *failures*: "" when there are none; else it starts
    with a blank line, to follow a report."""
    found = gang_failures(failures, job_of, now)
    return "" if found is None else "\n".join(["", "", *detail_lines(found)])


def of_gang(source: FailureSource | None, gang_id: str, now: float) -> GangFailures | None:
    """The rows of *gang_id*'s failures in *source* (its Jobs are in the gang's namespace)."""
    if source is None:
        return None
    namespace = gang_id.partition("/")[0]
    return gang_failures(source.failures(gang_id),
                         lambda name: source.job(f"{namespace}/{name}"), now)


def done(job: JobInfo) -> bool:
    """Did the Job complete (so its earlier failures no longer make a failing gang)?"""
    return job.completions is not None and job.succeeded >= job.completions


def failed_rows(source: FailureSource | None, shown: set[str],
                now: float) -> tuple[GangRow, ...]:
    """Rows for the gangs with failures and no row of their own (*shown*: none of their
    pods pending or running: a Job backing off, or one that gave up), by id, leaving out
    those whose Jobs completed."""
    if source is None:
        return ()
    out = []
    for gid in sorted(source.failed_gangs()):
        if gid in shown:
            continue
        namespace = gid.partition("/")[0]
        jobs = {f.job for f in source.failures(gid) if f.job}
        found = [source.job(f"{namespace}/{name}") for name in sorted(jobs)]
        if jobs and all(j is not None and done(j) for j in found):
            continue
        rows = of_gang(source, gid, now)
        if rows is None:
            continue
        workload = f"Job/{sorted(jobs)[0]}" if len(jobs) == 1 else ""
        out.append(GangRow(id=gid, namespace=namespace, queue=source.queue_of(gid),
                           state="Failed", workload=workload, gpus=0, pods=0, priority=0,
                           failures=rows))
    return tuple(out)
