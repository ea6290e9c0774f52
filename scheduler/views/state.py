"""The rows of every view, as plain frozen values that serialise to JSON and YAML as they are.

GPUs are counts, times are seconds (``now`` is epoch seconds; ages and ETAs are seconds from
it), shares are 0..1. A field a source cannot know is None (a tenant cannot list nodes: no
``nodes``), never a guess.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from policies.guards import PERIOD_WORDS, BudgetUse, Period
from scheduler.feed.grouping_jobset import JOBSET_NAME_LABEL
from scheduler.feed.grouping_terms import OPERATOR_KINDS
from scheduler.model import Gang, Tier
from scheduler.model.demand import gpus_text
from scheduler.model.numerals import is_digits
from scheduler.model.workloads import TRAINJOB_NAME_LABEL, PodInfo, rank_label
from scheduler.report.chargeback import Row as ChargebackRow
from scheduler.report.utilisation import GangUse, RankUse


@dataclass(frozen=True, slots=True)
class QueuePool:
    pool: str
    nominal: int  # GPUs of quota (the subtree's, for a parent)
    allocated: int  # GPUs allocated to running gangs
    borrowed: int  # allocated above nominal: idle quota of others in use
    lent: int  # own idle quota that others of the same parent use now
    #: GPU-equivalents (thousandths) held when some of ``allocated`` is a share of a GPU
    #: (quota charges a share whole); None: ``allocated`` is held whole.
    held_milli: int | None = None

    def allocated_text(self) -> str:
        """``3`` or, with shares, ``3 (2.5 held)``: what quota charges, and what is held."""
        if self.held_milli is None:
            return str(self.allocated)
        return f"{self.allocated} ({gpus_text(self.held_milli)} held)"


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    parent: str  # "" for a root
    depth: int  # 0 for a root: the tree is the order of the rows
    weight: float
    namespaces: tuple[str, ...]  # patterns of the namespaces it admits
    pools: tuple[QueuePool, ...]
    fair_share: float  # weight among siblings (1 for a root)
    usage_share: float
    running: int
    pending: int
    #: "" (in force), "Terminating" (being deleted: kept while gangs it admitted run or
    #: queues name it as parent, admitting nothing new) or "Invalid" (its current spec is
    #: refused: the row shows the version in force, if it ever had one); ``why`` says more.
    state: str = ""
    why: str = ""
    #: Fair share with memory: GPU-hours borrowed, decayed by the half-life (None: off or
    #: unknown to the source).
    remembered_gpu_hours: float | None = None
    #: GPUs allocated to its running gangs that the GPU metrics show idle (None: no metrics
    #: source).
    idle_gpus: int | None = None
    #: Its GPU-hour budget and what its subtree used of it this period (None: no budget).
    budget: BudgetUse | None = None


@dataclass(frozen=True, slots=True)
class RankRow:
    rank: str  # completion index or the trainer's rank label; else the pod's order in the gang
    pod: str
    node: str  # "" while pending
    phase: str


@dataclass(frozen=True, slots=True)
class FailureRow:
    """One rank's newest failure, worded by ``views.failures`` (as ``explain`` says it)."""

    rank: str  # "" when the pod has no rank (its name is all there is)
    pod: str
    kind: str  # ``FailureKind``: OOMKilled, exited, preempted, evicted, node lost...
    disrupted: bool  # preempted, evicted or its node lost: not a failure of its code
    what: str  # in full: "OOMKilled (exit code 137) in container trainer"
    short: str  # in a word or two: "OOMKilled", "exit 1", "preempted"
    age_seconds: float | None  # since it ended (None: unknown)
    message: str = ""  # the pod's or container's message (user text)
    #: With ``backoffLimitPerIndex``: what its rank's limit does next, and when its pod
    #: comes back ("" when unknown or not per index).
    retries: str = ""
    next: str = ""


@dataclass(frozen=True, slots=True)
class JobRetriesRow:
    """What a Job's ``backoffLimit`` does next (Job-wide: one line for all its ranks)."""

    job: str  # namespace/name
    retries: str
    next: str = ""


@dataclass(frozen=True, slots=True)
class GangFailures:
    """A gang's last failures: a one-line summary, the newest per rank, and how many earlier
    ones are kept besides."""

    summary: str  # "rank 3: OOMKilled 2m ago"
    ranks: tuple[FailureRow, ...]
    earlier: int = 0
    jobs: tuple[JobRetriesRow, ...] = ()


@dataclass(frozen=True, slots=True)
class GangRow:
    id: str  # namespace/name
    namespace: str
    queue: str
    state: str  # Pending or Running
    #: ``Kind/name`` of the workload that made its pods (``workload_of``), "" if unknown.
    workload: str
    gpus: int
    pods: int
    priority: int
    #: Pending: 1-based position among the queue's pending gangs and in the whole cycle's
    #: order (None: not ordered, e.g. members missing); why, and the estimated start in
    #: seconds when a reservation gives one.
    queue_position: int | None = None
    cluster_position: int | None = None
    reason: str = ""
    message: str = ""
    eta_seconds: float | None = None
    #: Running: seconds since it started, and each rank's node and state.
    age_seconds: float | None = None
    nodes: tuple[str, ...] = ()
    ranks: tuple[RankRow, ...] = ()
    #: Its last failures, also while it runs again or has no pods at all (None: none kept).
    failures: GangFailures | None = None
    #: Running: what its GPUs do, joined from the GPU metrics (None: no metrics source, or
    #: none of its pods has a series yet).
    use: GangUse | None = None
    #: ``interactive`` (a notebook or debugging session: ``gangscheduler.io/tier``) or
    #: ``batch`` (``scheduler.model.Tier``).
    tier: str = Tier.BATCH.value


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    pool: str
    gpus: int
    used: tuple[tuple[str, int], ...]  # (queue, GPUs) of running gangs, sorted by queue
    other: int  # GPUs of pods that are not gang-scheduler's
    free: int
    reserved: bool  # its free GPUs are kept for a reserved or nominated gang
    stranded: bool  # its free GPUs fit no waiting pod, while a gang waits for its pool
    borrowed: int  # of ``used``, GPUs of queues above their nominal quota in this pool


@dataclass(frozen=True, slots=True)
class EventRow:
    at: float  # epoch seconds
    kind: str  # Preempted or Reserved
    gang: str
    message: str


@dataclass(frozen=True, slots=True)
class ClusterView:
    now: float
    source: str  # "scheduler" (its own last cycle) or "apiserver" (what the caller may read)
    queues: tuple[QueueRow, ...]
    pending: tuple[GangRow, ...]  # in the order they will be considered
    running: tuple[GangRow, ...]  # by id
    nodes: tuple[NodeRow, ...] | None = None  # None: not readable by the caller
    events: tuple[EventRow, ...] = ()  # newest first
    #: Gangs with failures and no pending or running pods (a Job backing off, or one that
    #: gave up), state "Failed", by id.
    failed: tuple[GangRow, ...] = ()
    #: GPU-hours and cost per (queue, namespace), pools summed (``pool`` ""), of today (period
    #: ``YYYY-MM-DD``) and this month so far (``YYYY-MM``), from the scheduler's chargeback
    #: ledger; empty when none was given (another source, a replica that charged nothing).
    gpu_hours: tuple[ChargebackRow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterView:
        """Read back ``to_dict`` (the scheduler's ``/api/v1/state``)."""
        def failures(f: Mapping[str, Any] | None) -> GangFailures | None:
            if not f:
                return None
            return GangFailures(**{**f, "ranks": tuple(FailureRow(**r) for r in f["ranks"]),
                                   "jobs": tuple(JobRetriesRow(**j) for j in f["jobs"])})

        def budget(b: Mapping[str, Any] | None) -> BudgetUse | None:
            return None if not b else BudgetUse(**{**b, "period": Period(b["period"])})

        def use(u: Mapping[str, Any] | None) -> GangUse | None:
            if not u:
                return None
            return GangUse(**{**u, "ranks": tuple(RankUse(**r) for r in u["ranks"]),
                              "missing": tuple(u.get("missing") or ())})

        def gang(g: Mapping[str, Any]) -> GangRow:
            return GangRow(**{"workload": "", **g, "nodes": tuple(g.get("nodes") or ()),
                              "ranks": tuple(RankRow(**r) for r in g.get("ranks") or ()),
                              "failures": failures(g.get("failures")),
                              "use": use(g.get("use"))})

        nodes = data.get("nodes")
        return cls(
            now=float(data["now"]), source=str(data["source"]),
            queues=tuple(QueueRow(**{**q, "namespaces": tuple(q["namespaces"]),
                                     "pools": tuple(QueuePool(**p) for p in q["pools"]),
                                     "budget": budget(q.get("budget"))})
                         for q in data["queues"]),
            pending=tuple(gang(g) for g in data["pending"]),
            running=tuple(gang(g) for g in data["running"]),
            nodes=None if nodes is None else tuple(
                NodeRow(**{**n, "used": tuple(tuple(u) for u in n["used"])}) for n in nodes),
            events=tuple(EventRow(**e) for e in data.get("events") or ()),
            failed=tuple(gang(g) for g in data.get("failed") or ()),
            gpu_hours=tuple(ChargebackRow.from_dict(r) for r in data.get("gpu_hours") or ()))

    def for_namespaces(self, namespaces: Iterable[str] | None) -> ClusterView:
        """Only the gangs of *namespaces* and the queues that admit one of them (None: all)."""
        if namespaces is None:
            return self
        wanted = set(namespaces)
        queues = tuple(q for q in self.queues if any(fnmatchcase(ns, pattern) for ns in wanted
                                                     for pattern in q.namespaces))
        names = {q.name for q in queues}
        # Keep the ancestors of a visible queue, so the tree still reads as a tree.
        by_name = {q.name: q for q in self.queues}
        for q in queues:
            parent = q.parent
            while parent and parent in by_name:
                names.add(parent)
                parent = by_name[parent].parent
        return dataclasses.replace(
            self, queues=tuple(q for q in self.queues if q.name in names),
            pending=tuple(g for g in self.pending if g.namespace in wanted),
            running=tuple(g for g in self.running if g.namespace in wanted),
            failed=tuple(g for g in self.failed if g.namespace in wanted),
            events=tuple(e for e in self.events if e.gang.split("/", 1)[0] in wanted),
            gpu_hours=tuple(r for r in self.gpu_hours if r.namespace in wanted))


def remembers(view: ClusterView) -> bool:
    """Does any queue row carry remembered usage (fair share with memory on)? The tables
    show the column only then."""
    return any(q.remembered_gpu_hours is not None for q in view.queues)


def budgets(view: ClusterView) -> bool:
    """Does any queue row carry a GPU-hour budget? The tables show the column only then."""
    return any(q.budget is not None for q in view.queues)


def interactive(g: GangRow) -> bool:
    return g.tier == Tier.INTERACTIVE.value


def interactive_counts(view: ClusterView) -> dict[str, tuple[int, int]] | None:
    """Queue -> (running, pending) interactive gangs among the gangs the view shows; None
    when it shows none (the tables show the column only then). Counted from the gang rows,
    so a view narrowed to some namespaces counts only theirs."""
    running = Counter(g.queue for g in view.running if interactive(g))
    pending = Counter(g.queue for g in view.pending if interactive(g))
    if not running and not pending:
        return None
    return {q: (running[q], pending[q]) for q in sorted(running.keys() | pending.keys())}


def interactive_text(counts: Mapping[str, tuple[int, int]], queue: str) -> str:
    """``1 / 2``: a queue's interactive gangs running / pending ("-": none)."""
    running, pending = counts.get(queue, (0, 0))
    return f"{running} / {pending}" if running or pending else "-"


def budget_text(q: QueueRow) -> str:
    """``104 / 100 this week``: GPU-hours used of the budget in its period ("-": none)."""
    b = q.budget
    if b is None:
        return "-"
    return f"{b.used_gpu_hours:,.1f} / {b.gpu_hours:,.0f} {PERIOD_WORDS[b.period]}"


def use_text(g: GangRow) -> str:
    """A running gang's GPU use in a cell: ``57%, 1 idle`` ("-": no series for it yet)."""
    if g.use is None or g.use.utilisation is None:
        return "-"
    idle = f", {g.use.idle_gpus} idle" if g.use.idle_gpus else ""
    return f"{g.use.utilisation * 100:.0f}%{idle}"


def remembered(q: QueueRow) -> str:
    """A queue's remembered GPU-hours as the tables show them ("-": not known)."""
    return "-" if q.remembered_gpu_hours is None else f"{q.remembered_gpu_hours:,.1f}"


def queue_names(view: ClusterView) -> tuple[str, ...]:
    """Every queue the view names (its queue rows, its gangs' and its nodes' queues), sorted:
    the one order in which queues are given their colours on the dashboard."""
    names = {q.name for q in view.queues} | {g.queue for g in (*view.pending, *view.running,
                                                               *view.failed) if g.queue}
    names |= {q for n in view.nodes or () for q, _ in n.used}
    return tuple(sorted(names))


def workload_of(gang: Gang, pods: Iterable[PodInfo]) -> str:
    """``Kind/name`` of what a person submitted to make the gang, where its pods or its
    PodGroup say it: a TrainJob, a JobSet, a Job, a training operator's job; else "".
    The Job controller names the PodGroups it makes for a Job after hashes
    (``ddp-train-c965486c9-ddp-train-pgt-0-5f8cbc9c64``): nobody knows a gang by that."""
    pods = list(pods)
    for label, kind in ((TRAINJOB_NAME_LABEL, "TrainJob"), (JOBSET_NAME_LABEL, "JobSet")):
        name = next((p.labels[label] for p in pods if p.labels.get(label)), "")
        if name:
            return f"{kind}/{name}"
    native = gang.native
    if native is not None and native.owner_kind and native.owner_name:
        return f"{native.owner_kind}/{native.owner_name}"
    owner = next((p.owner for p in pods if p.owner is not None
                  and (p.owner.kind == "Job" or p.owner.kind in OPERATOR_KINDS)), None)
    return f"{owner.kind}/{owner.name}" if owner is not None else ""


def gang_labels(view: ClusterView) -> dict[str, str]:
    """How the views name each gang (by id): ``team-a/ddp-train (Job)`` where its workload is
    known, else its id. Where two gangs come from one workload (a JobSet whose later Jobs
    are a gang of their own), each keeps its id, the workload after it."""
    rows = (*view.pending, *view.running, *view.failed)
    short: dict[str, str] = {}
    for g in rows:
        if g.workload:
            kind, name = g.workload.split("/", 1)
            short[g.id] = f"{g.namespace}/{name} ({kind})"
    taken = Counter(short.values())
    labels = {}
    for g in rows:
        label = short.get(g.id, g.id)
        if taken[label] > 1:
            label = f"{g.id} ({g.workload.replace('/', ' ', 1)})"
        labels[g.id] = label
    return labels


def rank_of(labels: Mapping[str, str], annotations: Mapping[str, str], ordinal: int) -> str:
    """A pod's rank: its completion index or trainer rank label, else its order in the gang."""
    return rank_label(labels, annotations) or str(ordinal)


def ranks_of(pods: Iterable[PodInfo]) -> tuple[RankRow, ...]:
    """A gang's pods as ranks, in rank order (numeric ranks first)."""
    ordered = sorted(pods, key=lambda p: p.name)
    rows = [RankRow(rank_of(p.labels, p.annotations, i), p.name, p.node_name, str(p.phase))
            for i, p in enumerate(ordered)]
    # ASCII digits only: "²".isdigit() is true, int("²") raises (a rank read from an annotation).
    return tuple(sorted(rows, key=lambda r: (0, int(r.rank), "") if is_digits(r.rank)
                        else (1, 0, r.rank)))


def tree_order(rows: Iterable[QueueRow]) -> tuple[QueueRow, ...]:
    """Queues as a tree: each root, then its children (depth-first, by name). Orphans (a
    parent that does not exist) come last as roots, then queues in a cycle of parents (an
    edit the scheduler refused): every queue is shown once."""
    rows = list(rows)
    children: dict[str, list[QueueRow]] = {}
    for r in rows:
        children.setdefault(r.parent, []).append(r)
    known = {r.name for r in rows}
    out: list[QueueRow] = []
    shown: set[str] = set()

    def walk(parent: str, depth: int) -> None:
        for r in sorted(children.get(parent, ()), key=lambda q: q.name):
            if r.name not in shown:
                shown.add(r.name)
                out.append(dataclasses.replace(r, depth=depth))
                walk(r.name, depth + 1)

    walk("", 0)
    stray = [r for r in rows if r.parent and r.parent not in known]  # orphans first
    stray += sorted((r for r in rows if r not in stray), key=lambda q: q.name)
    for r in stray:
        if r.name not in shown:
            shown.add(r.name)
            out.append(dataclasses.replace(r, depth=0))
            walk(r.name, 1)
    return tuple(out)


def with_lent(rows: Iterable[QueueRow]) -> tuple[QueueRow, ...]:
    """Fill ``lent``: a queue's idle quota in a pool that its siblings' borrowing uses."""
    rows = list(rows)
    borrowed: dict[tuple[str, str], int] = {}
    for r in rows:
        for p in r.pools:
            borrowed[(r.parent, p.pool)] = borrowed.get((r.parent, p.pool), 0) + p.borrowed
    out = []
    for r in rows:
        pools = []
        for p in r.pools:  # roots share nothing: a tree uses only its own quota
            idle = max(0, p.nominal - p.allocated)
            others = borrowed.get((r.parent, p.pool), 0) - p.borrowed if r.parent else 0
            pools.append(dataclasses.replace(p, lent=min(idle, max(0, others))))
        out.append(dataclasses.replace(r, pools=tuple(pools)))
    return tuple(out)
