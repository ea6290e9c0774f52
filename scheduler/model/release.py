"""What a decision takes from a running gang: the whole gang, or some of its members.

Every place that takes running gangs away speaks of this one value: preemption candidates
and their cost, the fit world's gangs gone (``Snapshot.without``), reservation release
events, evictions in the plan, and the simulator carrying them out. So a partial release
(elastic shrink, partial reclaim, releasing a claim) plugs in here instead of in each.

A partial release (``of_pods``: an elastic gang's members above its minimum,
``scheduler.model.elastic``) needs the running gang to say which member runs on which node
(``RunningGang.pod_nodes``); what it frees is then that of its members alone (``released``),
and ``Snapshot.without`` leaves the rest of the gang running. A gang that does not know its
members' nodes can only be released whole (``whole_gang`` says so).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from scheduler.model.demand import gpus_of
from scheduler.model.durations import CLOCK_SKEW_SECONDS
from scheduler.model.elastic import part_of
from scheduler.model.gangs import PodRef, RunningGang
from scheduler.model.resources import Resources


@dataclass(frozen=True, slots=True)
class Release:
    """Some members of a running gang (``part``), or all of them (``part`` None)."""

    running: RunningGang
    #: The members released, a proper non-empty subset of the gang's pods; None: all.
    part: frozenset[PodRef] | None = None
    #: The gang's id (kept: searches read it often).
    id: str = field(init=False, repr=False, compare=False)
    #: ``released``, worked out on first use.
    _released: RunningGang | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", self.running.gang.id)

    @classmethod
    def whole(cls, running: RunningGang) -> Release:
        """The whole gang (what every decision releases today)."""
        return cls(running)

    @classmethod
    def of_pods(cls, running: RunningGang, pods: Iterable[PodRef]) -> Release:
        """These members of *running* (every member: the whole gang)."""
        part = frozenset(pods)
        members = frozenset(running.gang.pods)
        if not part <= members:
            strangers = ", ".join(sorted(str(p) for p in part - members))
            raise ValueError(f"{strangers}: not members of gang {running.id}")
        if not part:
            raise ValueError(f"a release of gang {running.id} names no member")
        return cls(running, None if part == members else part)

    def only(self, pods: Iterable[PodRef]) -> Release:
        """These of the released members (the rest kept)."""
        wanted = frozenset(pods)
        if self.part is not None and not wanted <= self.part:
            raise ValueError(f"gang {self.id}: release only pods it releases")
        return Release.of_pods(self.running, wanted)

    @property
    def is_whole(self) -> bool:
        return self.part is None

    @property
    def pods(self) -> tuple[PodRef, ...]:
        """The released members, in the gang's role order."""
        pods = self.running.gang.pods
        part = self.part
        return pods if part is None else tuple(p for p in pods if p in part)

    def whole_gang(self, where: str) -> RunningGang:
        """The running gang, for code that can release only whole gangs (*where* says
        which, in the error a partial release gets)."""
        if self.part is not None:
            raise NotImplementedError(
                f"{where}: a partial release ({len(self.part)} of the "
                f"{len(self.running.gang.pods)} pods of gang {self.id}) is not supported here")
        return self.running

    @property
    def released(self) -> RunningGang:
        """The released members as a running gang of their own (the gang itself when
        whole): what is freed and given back to quota."""
        if self.part is None:
            return self.running
        known = self._released
        if known is None:
            known = part_of(self.running, self.part)
            object.__setattr__(self, "_released", known)
        return known

    @property
    def freed(self) -> tuple[tuple[str, Resources], ...]:
        """(node, resources) the release frees, sorted by node."""
        return self.released.allocations

    @property
    def charges(self) -> tuple[tuple[str, Resources], ...]:
        """(node, what quota and GPU accounting get back there), sorted by node: the
        released members' ``RunningGang.charges``, which count a GPU that comes from a
        device claim too."""
        return self.released.charges

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes where something is freed, sorted."""
        return tuple(n for n, _ in self.freed)

    @property
    def gpus(self) -> int:
        """GPUs freed, as charged (``RunningGang.usage``)."""
        return gpus_of(self.released.usage)

    def work_at_risk(self, now: float) -> float:
        """GPU-seconds lost if the released members stopped now: since the gang's last
        checkpoint, else its start (the victim cost preemption minimises).

        A checkpoint more than ``CLOCK_SKEW_SECONDS`` ahead of *now* is not believed: it would
        make the gang the cheapest victim of all (nothing lost), on a value no checkpoint
        could have written yet; the gang counts as never checkpointed (the annotation check
        tells its user). One ahead by less is clock skew: nothing lost since."""
        running = self.running
        checkpoint = running.last_checkpoint
        believed = checkpoint is not None and checkpoint <= now + CLOCK_SKEW_SECONDS
        since = checkpoint if believed and checkpoint is not None else running.start_time
        return max(0.0, now - since) * self.gpus
