"""Inputs and outputs of the placement solver.

A result is either a ``Placement`` (counts of pods per role and node, every required member
included) or an ``Unplaceable`` with a reason a person can act on. There is no third,
partial outcome: that is the all-or-nothing contract the rest of the scheduler relies on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from scheduler.model import Gang, RunningGang
from scheduler.model.demand import node_charges
from scheduler.model.prebind import PreBind
from scheduler.model.resources import Resources, total
from scheduler.placement.gpu_shares import Mix

if TYPE_CHECKING:
    from scheduler.world.snapshot import Snapshot


class Question(StrEnum):
    """What a trial asks, in one knob from ``fit`` down to the solver's reasons.

    ``WHY``: the plain attempt, whose answer becomes the gang's pending reason: quota says
    which pools refuse it and why, placement works out why no node will do. ``WHETHER``: a
    search (a victim proof, a reservation's start, waiting for draining gangs) only needs
    yes or no; it never reads a reason, and working one out (totals over every eligible node
    and domain) cost more than the failed solve itself. A failure then comes back as
    ``UNEXPLAINED``. Placement is the same either way; only the words differ."""

    WHETHER = "whether"
    WHY = "why"


@dataclass(frozen=True, slots=True)
class PlacementParams:
    """Knobs of one solve. Defaults suit the live scheduler; the simulator may tighten them."""

    use_cpsat: bool = True
    #: Wall-clock cap for one CP-SAT solve (seconds); the deterministic limit below is what
    #: keeps results reproducible, the wall limit only guards a slow machine.
    cpsat_time_limit: float = 2.0
    cpsat_deterministic_limit: float = 1.0
    cpsat_workers: int = 1
    seed: int = 0
    #: Under a required topology, how many candidate domains (tightest first) CP-SAT may try
    #: after greedy failed in all of them; untried ones make the answer ``SOLVER_LIMIT``.
    cpsat_max_domains: int = 8
    #: Nodes the placement must avoid (e.g. kept for a reservation or a nomination).
    excluded_nodes: frozenset[str] = frozenset()
    #: If set, only these nodes may be used (e.g. backfill into a window).
    allowed_nodes: frozenset[str] | None = None
    #: Why it does not fit, or only whether (see ``Question``); a search asks ``WHETHER``.
    question: Question = Question.WHY
    #: The ``fragmentation`` packing policy, under this observed request mix: CP-SAT adds
    #: the expected fragmentation of the GPUs it leaves (``cpsat_fragmentation``). None:
    #: best fit alone, the model of every solve before the policy existed.
    fragmentation_mix: Mix | None = None

    def asking(self, question: Question) -> PlacementParams:
        """These knobs with *question* asked (the same object if it is already)."""
        return self if self.question is question else replace(self, question=question)


class UnplaceableReason(StrEnum):
    """Why a gang cannot be placed.

    ``NO_ELIGIBLE_NODES`` and ``NEVER_FITS`` cannot be fixed by preemption (they are checked
    against allocatable, not free); ``INSUFFICIENT_CAPACITY`` and ``TOPOLOGY`` may be.
    """

    NO_ELIGIBLE_NODES = "NoEligibleNodes"  # selectors, affinity, taints, pools exclude every node
    NEVER_FITS = "NeverFits"  # too big even for an empty cluster (or domain)
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"  # would fit if running work left
    TOPOLOGY = "Topology"  # enough capacity overall, but not within one required domain
    SOLVER_LIMIT = "SolverLimit"  # CP-SAT ran out of time without proving either way
    #: Inter-pod affinity, topology spread or host ports rule out what is free now; running
    #: pods are involved, so removing some may help.
    POD_CONSTRAINTS = "PodConstraints"
    VOLUMES = "Volumes"  # a claim is missing, unbound or unusable: the gang waits for it
    UNSUPPORTED = "Unsupported"  # a field the scheduler does not evaluate: refused
    #: The free devices cannot serve every member's claims now (``device_terms``): devices
    #: held by running gangs may free up, so it waits as for capacity (reservations,
    #: preemption proven by releasing the victims' claims).
    DEVICES = "Devices"
    #: A device claim (``spec.resourceClaims``) is missing or unusable, or no node is
    #: offered devices (``device_claims``): no running gang's end or eviction cures it.
    DEVICE_CLAIMS = "DeviceClaims"
    #: Not placed, reason not worked out (``Question.WHETHER`` asked).
    UNEXPLAINED = "Unexplained"


@dataclass(frozen=True, slots=True)
class Assignment:
    role: str
    node: str
    count: int


_M = TypeVar("_M")


def spread_members(members: Sequence[_M], role: str,
                   assignments: Iterable[Assignment]) -> list[tuple[_M, str]]:
    """*role*'s members, in their order, onto the nodes *assignments* give it, in theirs
    (sorted by (role, node), as ``Placement.assignments`` are): the one rule for which pod
    binds to which node, so the claims decided for a member's node are the ones its pod
    gets (``device_terms``) when it binds (``decide.plan.map_pods``)."""
    out: list[tuple[_M, str]] = []
    it = iter(members)
    for a in assignments:
        if a.role != role:
            continue
        for _ in range(a.count):
            member = next(it, None)
            if member is None:
                return out
            out.append((member, a.node))
    return out


#: Failures that removing running gangs may cure (capacity allocated to them, their pods'
#: constraints): preemption may help, where eligibility or size never changes.
RUNNING_GANGS_IN_THE_WAY = frozenset({UnplaceableReason.INSUFFICIENT_CAPACITY,
                                      UnplaceableReason.DEVICES,
                                      UnplaceableReason.TOPOLOGY,
                                      UnplaceableReason.POD_CONSTRAINTS})


@dataclass(frozen=True, slots=True)
class Placement:
    gang_id: str
    assignments: tuple[Assignment, ...]  # sorted by (role, node); counts > 0
    solved_by: str = "greedy"  # "greedy" | "cpsat"
    domains_used: int = 0  # domains of the gang's topology level touched (0 without a constraint)
    #: What to write about the gang's claims before any member binds (its unbound
    #: WaitForFirstConsumer claims: a PV's claimRef, a selected node).
    prebinds: tuple[PreBind, ...] = ()
    #: A claim shared across nodes must be provisioned (and bound) before the members bind:
    #: carry out ``prebinds`` and wait, instead of binding.
    volumes_first: bool = False

    def allocations(self, gang: Gang) -> tuple[tuple[str, Resources], ...]:
        """What the placement uses per node, sorted by node."""
        per_node: dict[str, list[Resources]] = {}
        for a in self.assignments:
            per_node.setdefault(a.node, []).append(gang.role(a.role).requests * a.count)
        return tuple((node, total(parts)) for node, parts in sorted(per_node.items()))

    def charges(self, gang: Gang, allocations: tuple[tuple[str, Resources], ...] | None = None,
                ) -> tuple[tuple[str, Resources], ...]:
        """What quota charges for the placement per node, sorted by node (*allocations*:
        ``allocations(gang)`` when the caller has it already): the allocations themselves
        while every role's charge is its requests (``scheduler.model.demand.node_charges``)."""
        return node_charges(self.allocations(gang) if allocations is None else allocations,
                            gang.roles, ((a.role, a.node, a.count) for a in self.assignments))

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({a.node for a in self.assignments}))

    def pods_placed(self) -> int:
        return sum(a.count for a in self.assignments)

    @property
    def members(self) -> tuple[tuple[str, str, int], ...]:
        """(role, node, pods): what ``RunningGang.members`` records."""
        return tuple((a.role, a.node, a.count) for a in self.assignments)

    def as_running(self, gang: Gang, start_time: float) -> RunningGang:
        end = start_time + gang.runtime_estimate if gang.runtime_estimate is not None else None
        return RunningGang(gang=gang, allocations=self.allocations(gang), start_time=start_time,
                           expected_end=end, members=self.members)


@dataclass(frozen=True, slots=True)
class Unplaceable:
    gang_id: str
    reason: UnplaceableReason
    message: str  # actionable: "needs 64 GPUs within one rack; the largest rack has 40 free"

    @property
    def preemption_may_help(self) -> bool:
        return self.reason in RUNNING_GANGS_IN_THE_WAY


PlacementResult = Placement | Unplaceable

#: What the cycle calls to place one gang (``placement.solve``, or a test double / timing wrapper).
Solver = Callable[[Gang, "Snapshot", PlacementParams], PlacementResult]


@dataclass(frozen=True, slots=True)
class RoleLimits:
    """What the constraints leave a role: nodes it may not use (and why), a per-node cap."""

    blocked: frozenset[str] = frozenset()
    why: tuple[tuple[str, int], ...] = ()  # (reason, nodes it blocks), most nodes first
    by_running: bool = False  # some block is due to running pods (preemption may help)
    #: Some block is for want of free devices (a ``DEVICES`` wait when no node is left).
    by_devices: bool = False
    cap: int = 0  # at most this many members per node (0: no cap)
    cap_why: str = ""  # the constraint behind the cap, for reasons
    score: Mapping[str, int] = field(default_factory=dict)  # static preference per node
