"""The cache's assumptions: binds (and pre-bind decisions) taken as done before the watch
shows them.

A pod handed to the binder is *assumed* bound until the watch confirms it, so the next cycle
does not hand the same capacity out twice (kube-scheduler's assume/forget). While its bind
is in flight an assumption never expires (the binder's outcome ends it: ``forget`` on a
failure, ``settle`` on success); a settled one that the watch never confirms expires after
``assume_ttl`` seconds, and ``next_expiry`` says when, so the live loop runs a cycle then
(nothing else would: ``scheduler.run.wake``). A mixin: ``ClusterCache`` provides the lock, the
pods, the dirty set and ``_touch``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scheduler.feed.facts import ClusterFacts
from scheduler.model import PodRef
from scheduler.model.prebind import PreBind
from scheduler.model.workloads import PodInfo


@dataclass(slots=True)
class Assumption:
    node: str
    at: float
    #: When it lapses unless the watch confirms it; None while the bind is in flight.
    expires: float | None


class Assuming:
    """``ClusterCache``'s assume / settle / forget (see the module docstring)."""

    _lock: threading.RLock
    _pods: dict[str, PodInfo]
    _assumed: dict[str, Assumption]  # pod uid -> node
    _gid_of: dict[str, str]
    _dirty: set[str]
    assume_ttl: float
    facts: ClusterFacts

    def _touch(self) -> None:
        raise NotImplementedError

    def change_facts(self, change: Callable[[ClusterFacts], bool], *,
                     namespaces: bool = False) -> None:
        raise NotImplementedError

    def assume_prebinds(self, decisions: Iterable[PreBind], now: float,
                        binding: bool = False) -> None:
        """Pre-bind decisions the actuator carried out, until the watch shows them; or that a
        bind in flight is carrying out (*binding*: kept until ``land_prebinds``)."""
        done = tuple(decisions)
        self.change_facts(lambda facts: facts.assume(done, now, held=binding))

    def land_prebinds(self, flown: Iterable[PreBind], done: Iterable[PreBind],
                      now: float) -> None:
        """The flight that was carrying out *flown* landed, having carried out *done*
        (``ClusterFacts.land``)."""
        flew, did = tuple(flown), tuple(done)
        self.change_facts(lambda facts: facts.land(flew, did, now))

    # Assume / forget ----------------------------------------------------------------------
    def assume(self, pod_nodes: Iterable[tuple[PodRef, str]], now: float,
               binding: bool = False) -> None:
        """Take *pod_nodes* as bound from *now*: their bind done (it lapses after
        ``assume_ttl`` unless the watch confirms it), or in flight (*binding*: it keeps
        until ``settle`` or ``forget``)."""
        expires = None if binding else now + self.assume_ttl
        with self._lock:
            assumed = 0
            for ref, node in pod_nodes:
                pod = self._pods.get(ref.uid)
                if pod is not None and not pod.node_name:
                    self._assumed[ref.uid] = Assumption(node, now, expires)
                    self._mark_pod_dirty(ref.uid)
                    assumed += 1
            if assumed:  # a cycle that bound nothing changes nothing
                self._touch()

    def settle(self, pods: Iterable[PodRef], now: float) -> None:
        """The binds of *pods* (assumed while in flight) are done: from *now* their
        assumptions lapse after ``assume_ttl`` unless the watch confirms them. The pods
        look the same to a cycle, so nothing is rebuilt."""
        with self._lock:
            for ref in pods:
                assumed = self._assumed.get(ref.uid)
                if assumed is not None:
                    assumed.expires = now + self.assume_ttl

    def forget(self, pods: Iterable[PodRef]) -> None:
        with self._lock:
            forgotten = 0
            for ref in pods:
                if self._assumed.pop(ref.uid, None) is not None:
                    self._mark_pod_dirty(ref.uid)
                    forgotten += 1
            if forgotten:
                self._touch()

    def _mark_pod_dirty(self, uid: str) -> None:
        gid = self._gid_of.get(uid)
        if gid is not None:
            self._dirty.add(gid)

    def _expire_assumptions(self, now: float) -> None:
        stale = [uid for uid, a in self._assumed.items()
                 if a.expires is not None and now > a.expires]
        for uid in stale:
            del self._assumed[uid]
            self._mark_pod_dirty(uid)
        if stale:
            self._touch()

    def next_expiry(self) -> float | None:
        """When an assumption (a bind done, a pre-bind decision) lapses unless the watch
        confirms it first: the cache changes then with no event (None: nothing assumed that
        can lapse). Both lapse once strictly past that time."""
        with self._lock:
            binds = (a.expires for a in self._assumed.values() if a.expires is not None)
            return min((t for t in (min(binds, default=None), self.facts.next_expiry())
                        if t is not None), default=None)


    def _effective(self, uid: str) -> PodInfo:
        pod = self._pods[uid]
        assumed = self._assumed.get(uid)
        if assumed is not None and not pod.node_name:
            pod = dataclasses.replace(pod, node_name=assumed.node, started_at=assumed.at)
        return pod
