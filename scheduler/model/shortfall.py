"""A running gang below its minimum: fewer members staying than it needs to make progress.

Why it is worth a name: a gang started whole can lose members while it runs (a node fails and
its pods are evicted, another scheduler's preemption, a worker that crashed), and the rest go on
keeping their GPUs while an all-reduce waits for peers that are not there. Nothing is pending
yet (the controller may take a while to recreate the pod, or never will), so no pending reason
covers it; the user needs to hear that the gang is short, by how many, and which ranks (the
completion indices of an Indexed Job) are missing, to tell a slow replacement from a lost one.

What is *not* a shortfall, so that the warning means what it says:

- a member that Succeeded: its rank is done, not lost, even before its Job's status counts
  it (the Job controller updates ``status.succeeded`` a moment after the pod finishes);
- a gang being evicted: while any member is leaving through an eviction (``DisruptionTarget``
  reason ``PreemptionByScheduler`` or ``EvictionByEvictionAPI``: this scheduler's whole-gang
  preemption, or an admin draining or evicting its members) the gang is being preempted or
  evicted, not running short; the watch reports its members one at a time, so counting those
  left would say "2 of 4 running" of a gang that is going whole. Once the evicted members are
  gone, survivors that stay are short (an admin who evicted one member of four);
- a gang with no member left running: it is pending again, placed whole.

A member lost otherwise (a node failure's ``DeletionByTaintManager``, a crash, a deletion
without a condition) leaves the rest short.

Pure: worked out by grouping from the gang's pods and its Job, reported by the edges (a PodGroup
condition, a Warning event, a metric, ``explain``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.model.numerals import is_digits
from scheduler.model.workloads import JobInfo, PodInfo, PodPhase

#: The label the Job controller puts on each pod of an Indexed Job (its rank).
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
#: ``DisruptionTarget`` reasons of an eviction someone decided (a preemption, a drain, an
#: admin's eviction), as opposed to a loss (a node failure, the kubelet's own eviction).
EVICTION_REASONS = frozenset({"PreemptionByScheduler", "EvictionByEvictionAPI"})
#: Ranks named in a message at most; the rest are counted.
MAX_NAMED = 8


@dataclass(frozen=True, slots=True)
class Shortfall:
    """*present* members stay bound (not terminating) of the *minimum* the gang needs;
    *replacements* members wait to be placed; *missing_ranks* are the completion indices no
    pod carries and no completion covers (empty when the gang's members are not indexed)."""

    present: int
    minimum: int
    replacements: int = 0
    missing_ranks: tuple[int, ...] = ()

    @property
    def missing(self) -> int:
        return self.minimum - self.present

    def describe(self) -> str:
        """One line for a condition, an event and ``explain``; it changes only when the
        gang's membership does, so a writer that compares messages writes only then."""
        text = f"{self.present} of {self.minimum} members running: {self.missing} missing"
        if self.missing_ranks:
            named = ", ".join(str(r) for r in self.missing_ranks[:MAX_NAMED])
            more = len(self.missing_ranks) - MAX_NAMED
            rank_word = "rank" if len(self.missing_ranks) == 1 else "ranks"
            text += f" ({rank_word} {named}{f' and {more} more' if more > 0 else ''})"
        if self.replacements:
            text += f"; {self.replacements} replacement(s) waiting to be placed"
        else:
            text += "; no replacement created yet"
        return text


def parse_indexes(text: str) -> frozenset[int]:
    """A Job's ``status.completedIndexes`` ("1,3-5,7") as a set; raises ValueError naming the
    part that is not an index or a range."""
    indexes: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, sep, high = part.partition("-")
        if not is_digits(low) or (sep and not is_digits(high)):
            raise ValueError(f"not an index or a range of indexes: {part!r}")
        indexes.update(range(int(low), int(high if sep else low) + 1))
    return frozenset(indexes)


def shortfall(staying: Iterable[Mapping[str, str]], minimum: int, waiting: int,
              completions: int | None = None,
              completed: frozenset[int] = frozenset()) -> Shortfall | None:
    """The shortfall of a gang whose bound, not terminating members carry the labels in
    *staying*, with *waiting* members unbound, or None when it has its *minimum* or no member
    runs (then it is pending, not short). An Indexed Job's *completions* and *completed*
    indexes name the missing ranks."""
    labels = list(staying)
    if not labels or len(labels) >= minimum:
        return None
    ranks: tuple[int, ...] = ()
    if completions is not None:
        indexed = {int(v) for lb in labels
                if is_digits(v := lb.get(COMPLETION_INDEX_LABEL, ""))}
        if len(indexed) == len(labels):  # every member indexed: the ranks are meaningful
            ranks = tuple(i for i in range(completions) if i not in indexed and i not in completed)
    return Shortfall(present=len(labels), minimum=minimum, replacements=waiting,
                     missing_ranks=ranks)


def being_evicted(pod: PodInfo) -> bool:
    """Is *pod* leaving through an eviction someone decided (still terminating)?"""
    return (pod.is_bound and pod.terminating and not pod.is_finished
            and pod.disruption in EVICTION_REASONS)


def _rank(pod: PodInfo) -> int | None:
    value = pod.labels.get(COMPLETION_INDEX_LABEL, "")
    return int(value) if is_digits(value) else None


def of_members(members: Sequence[PodInfo], min_member: int,
               job: JobInfo | None = None) -> Shortfall | None:
    """The shortfall of a running gang of *members* (every pod of it, finished ones too) whose
    minimum is *min_member*, as its terms say (for a Job, less the completions its status
    counts); None when it is not short (see the module docstring)."""
    if any(being_evicted(p) for p in members):
        return None
    live = [p for p in members if not p.is_finished]
    staying = [p for p in live if p.is_bound and not p.terminating]
    waiting = sum(1 for p in live if not p.is_bound and not p.terminating)
    done = [p for p in members if p.phase is PodPhase.SUCCEEDED]
    if job is None:
        return shortfall((p.labels for p in staying), min_member - len(done), waiting)
    completed, minimum = job.completed_indexes, min_member
    if job.indexed:
        completed = completed | {r for p in done if (r := _rank(p)) is not None}
    if job.completions is not None:  # (else a JobSet's Jobs as one: sized per Job already)
        # The Job keeps its succeeded pods, so those it has not counted yet are the excess.
        counted = len(completed) if job.indexed else max(job.succeeded, len(done))
        minimum = min(minimum, max(0, job.completions - counted))
    return shortfall((p.labels for p in staying), minimum, waiting,
                     job.completions if job.indexed else None, completed)
