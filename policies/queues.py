"""Queues and the global scheduler policy as frozen values (parsed elsewhere, in ``parsing``).

A ``Queue`` is who may submit, how much of each node pool it is guaranteed (``nominal``), how
much idle quota it may borrow from and lend to queues under the same parent, and how its gangs
are ordered, preempted and backfilled. ``SchedulerPolicy`` switches the cycle's mechanisms on
and off globally, which is what lets the simulator run baselines (``fifo-gang``) through the
very same ``decide`` as the full policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase

from policies.guards import NO_GUARDS, Guards
from policies.interactive import NO_CAPS, InteractivePolicy
from scheduler.model.resources import Resources
from scheduler.placement.types import PlacementParams

API_GROUP = "gangscheduler.io"
API_VERSION = f"{API_GROUP}/v1alpha1"


class Packing(StrEnum):
    """How placement chooses among nodes that fit (``spec.placement.packing``).

    ``best-fit``: the fewest GPUs left over, the scheduler's rule from the start.
    ``fragmentation``: the least expected fragmentation added under the request mix the
    scheduler observes this cycle (``scheduler.placement.observed_mix``), best fit breaking
    ties: greedy's single-node choice and CP-SAT's objective both carry it."""

    BEST_FIT = "best-fit"
    FRAGMENTATION = "fragmentation"


class WithinQueuePreemption(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class ReclaimPolicy(StrEnum):
    """Which gangs of borrowing queues this queue may preempt to get its own quota back."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class QueueingStrategy(StrEnum):
    #: The head gang of the queue blocks the rest of the queue until it starts.
    STRICT_FIFO = "StrictFIFO"
    #: A gang that cannot start yet lets later gangs of the queue try.
    BEST_EFFORT = "BestEffort"


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-resource limits where naming a resource with 0 differs from not naming it.

    ``Resources`` drops zero entries, which is right for amounts but wrong for limits: a
    ``borrowingLimit`` of 0 GPUs forbids borrowing, an absent one allows any.
    """

    items: tuple[tuple[str, int], ...] = ()  # sorted by resource name

    @classmethod
    def of(cls, amounts: Mapping[str, int]) -> Limits:
        return cls(tuple(sorted(amounts.items())))

    def limit(self, resource: str) -> int | None:
        for name, value in self.items:
            if name == resource:
                return value
        return None

    def names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.items)

    def __bool__(self) -> bool:
        return bool(self.items)


@dataclass(frozen=True, slots=True)
class PoolQuota:
    """A queue's share of one node pool.

    ``covered`` lists every resource named in ``nominal`` (zeros included): only covered
    resources are limited by quota in this pool; the others are limited by capacity alone.
    """

    pool: str
    nominal: Resources
    covered: frozenset[str]
    borrowing_limit: Limits = Limits()  # absent resource: may borrow without limit
    lending_limit: Limits = Limits()  # absent resource: all idle nominal is lendable


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    within_queue: WithinQueuePreemption = WithinQueuePreemption.LOWER_PRIORITY
    reclaim_from_others: ReclaimPolicy = ReclaimPolicy.ANY
    #: A running gang of this queue is never preempted before it has run this long.
    min_runtime_seconds: float = 0.0
    #: Reclaim by other queues takes only what runs above this queue's quota: each running
    #: gang's minimum, while it fits within the quota, is kept (``policies.semi``).
    semi_preemptible: bool = False


@dataclass(frozen=True, slots=True)
class QueueingPolicy:
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT
    #: May gangs of this queue start ahead of a reserved gang (when that delays nothing)?
    backfill: bool = True
    #: Runtime assumed for gangs without an estimate of their own; None: unknown.
    default_runtime_seconds: float | None = None
    #: How long a gang of this queue must have been pending before it may get a reservation;
    #: None: the scheduler policy's ``reserve_after_seconds``.
    reserve_after_seconds: float | None = None
    #: Order the queue's gangs of equal tier and priority by what their owners already hold
    #: (``policies.owners``), so one owner's many gangs cannot flood the queue's share.
    owner_fairness: bool = False


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    parent: str | None = None
    weight: float = 1.0
    namespaces: tuple[str, ...] = ()
    quotas: tuple[PoolQuota, ...] = ()
    preemption: PreemptionPolicy = PreemptionPolicy()
    queueing: QueueingPolicy = QueueingPolicy()
    #: Runaway guards (``policies.guards``): max runtime, GPU-hour budget, gang caps.
    guards: Guards = NO_GUARDS
    #: Per-user caps on its interactive gangs (``policies.interactive``).
    interactive: InteractivePolicy = NO_CAPS

    def quota(self, pool: str) -> PoolQuota | None:
        for q in self.quotas:
            if q.pool == pool:
                return q
        return None

    def admits_namespace(self, namespace: str) -> bool:
        """Namespace globs; an empty list admits nobody (write ``"*"`` to admit everyone)."""
        return any(fnmatchcase(namespace, pattern) for pattern in self.namespaces)

    def runtime_of(self, estimate: float | None) -> float | None:
        return estimate if estimate is not None else self.queueing.default_runtime_seconds

    def reserve_after(self, policy: SchedulerPolicy) -> float:
        """The starvation threshold of this queue's gangs (its own, else the policy's)."""
        own = self.queueing.reserve_after_seconds
        return policy.reserve_after_seconds if own is None else own


class OrderingMode(StrEnum):
    #: Queue fair-share deficit, then priority, then age, then uid.
    FAIR_SHARE = "FairShare"
    #: Arrival order across all queues (creation time, then uid); priority is ignored.
    FIFO = "FIFO"


@dataclass(frozen=True, slots=True)
class SchedulerPolicy:
    """Global switches of the cycle; per-queue settings refine them, never widen them."""

    ordering: OrderingMode = OrderingMode.FAIR_SHARE
    preemption: bool = True
    #: The first gang that does not fit gets nodes and an estimated start kept for it...
    reservation: bool = True
    #: ...once it has been pending this long (since its creation): a starvation remedy, not a
    #: first resort; younger gangs just wait while later ones start where they fit. Queues
    #: may set their own (``QueueingPolicy.reserve_after_seconds``).
    reserve_after_seconds: float = 0.0
    #: At most this many gangs have a reservation at once, each in pools no other one has.
    #: One (the default) is EASY backfill: measured on two pools, one reservation per pool
    #: drained both pools at once and cost utilization and every queueing percentile
    #: (simulator/README.md, "Reservations"); raise it to protect starving gangs of several
    #: pools at the same time.
    max_reservations: int = 1
    #: Off: once a gang does not fit for lack of capacity, nothing later in order starts
    #: (strict head-of-line blocking). On: later gangs may start if they delay no reservation.
    backfill: bool = True
    placement: PlacementParams = field(default_factory=PlacementParams)
    #: How placement chooses among nodes that fit; ``decide`` turns ``fragmentation`` into
    #: ``placement.fragmentation_mix`` once per cycle. Off (best fit) by default, so the
    #: decisions of every policy written before it are unchanged.
    packing: Packing = Packing.BEST_FIT
    #: Fair share with memory: what queues borrowed in the past counts towards their
    #: fair-share rank, decayed by half every this many seconds (``policies.usage_memory``).
    #: 0: off, ranks look only at what runs now.
    usage_half_life_seconds: float = 0.0
    #: Pools whose gangs, when no current node has room, may ask the cluster-autoscaler for
    #: all their nodes at once (``scheduler.decide.scale_up``). Empty (the default): never.
    #: The live scheduler reads the node groups and the autoscaler's answers only while this
    #: is not empty (``scheduler.kube.read.scale_up_feed``).
    scale_up_pools: frozenset[str] = frozenset()

    @classmethod
    def preset(cls, name: str) -> SchedulerPolicy:
        try:
            return PRESETS[name]
        except KeyError:
            known = ", ".join(sorted(PRESETS))
            raise KeyError(f"unknown scheduler policy preset {name!r} (known: {known})") from None


PRESETS: Mapping[str, SchedulerPolicy] = {
    # Everything on: the scheduler as shipped.
    "gang-scheduler": SchedulerPolicy(),
    # Baseline: arrival order, head-of-line blocking, nothing ever preempted.
    "fifo-gang": SchedulerPolicy(ordering=OrderingMode.FIFO, preemption=False,
                                 reservation=False, backfill=False),
    # Baseline: arrival order, any gang that fits starts (big gangs may starve).
    "greedy-gang": SchedulerPolicy(ordering=OrderingMode.FIFO, preemption=False,
                                   reservation=False, backfill=True),
}


@dataclass(frozen=True, slots=True)
class QueueSet:
    """Validated queues by name, plus the hierarchy derived from their ``parent`` fields."""

    queues: Mapping[str, Queue] = field(default_factory=dict)
    #: Queues being deleted, kept in force while gangs they admitted run or queues name them
    #: as parent: they admit no new gangs (``policies.validation.PolicyStore.terminate``).
    terminating: frozenset[str] = frozenset()

    @classmethod
    def of(cls, queues: Iterable[Queue], terminating: Iterable[str] = ()) -> QueueSet:
        by_name = {q.name: q for q in sorted(queues, key=lambda q: q.name)}
        return cls(by_name, frozenset(t for t in terminating if t in by_name))

    def __iter__(self) -> Iterator[Queue]:
        return iter(self.queues.values())

    def __len__(self) -> int:
        return len(self.queues)

    def get(self, name: str) -> Queue | None:
        return self.queues.get(name)

    def parent_of(self, name: str) -> str | None:
        """The parent, or None for a root (an unknown parent is treated as no parent)."""
        queue = self.queues.get(name)
        if queue is None or queue.parent not in self.queues:
            return None
        return queue.parent

    def children_of(self, name: str | None) -> tuple[str, ...]:
        return tuple(q.name for q in self.queues.values() if self.parent_of(q.name) == name)

    def path_of(self, name: str) -> tuple[str, ...]:
        """Root first, the queue itself last (cycle-safe: stops at a repeated name)."""
        path = [name]
        parent = self.parent_of(name)
        while parent is not None and parent not in path:
            path.append(parent)
            parent = self.parent_of(parent)
        return tuple(reversed(path))

    def root_of(self, name: str) -> str:
        return self.path_of(name)[0]

    def is_leaf(self, name: str) -> bool:
        return not self.children_of(name)

    def accepting(self, namespace: str, parents: frozenset[str] | None = None
                  ) -> tuple[str, ...]:
        """The queues a gang of *namespace* may be submitted to, by name: leaves (*parents*:
        the queues with children, if the caller has them at hand), not being deleted, that
        admit the namespace. What a refused gang is advised and what the admission webhook
        labels a namespace's workloads with (when it names exactly one)."""
        if parents is None:
            parents = frozenset(p for q in self.queues.values()
                                if (p := self.parent_of(q.name)) is not None)
        return tuple(q.name for q in self.queues.values()
                     if q.name not in parents and q.name not in self.terminating
                     and q.admits_namespace(namespace))


@dataclass(frozen=True, slots=True)
class PolicySet:
    """Everything ``decide`` needs besides the cluster: queues and the global switches."""

    queues: QueueSet = field(default_factory=QueueSet)
    scheduler: SchedulerPolicy = field(default_factory=SchedulerPolicy)
