"""The pods on each node as other pods' constraints see them: labels, terms, ports, claims.

Inter-pod affinity, topology spread and host ports are evaluated against *running* pods:
running gangs (per role and node, from ``RunningGang.members``) and pods of other
schedulers (``Occupant`` records the cache builds). An ``Occupancy`` belongs to one
snapshot and is lazy: deriving a snapshot (a placement assumed, victims removed) costs
nothing here until a solve asks, and then the index is brought forward from the parent's
by the gangs that changed instead of being rebuilt. Most gangs never ask: a gang without
inter-pod constraints only reads ``has_anti_affinity`` (kept eagerly, O(1) per derive).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from scheduler.model import RunningGang
from scheduler.model.constraints import NO_CONSTRAINTS, PodConstraints
from scheduler.model.labels import LabelSelector

_K = TypeVar("_K")


@dataclass(frozen=True, slots=True)
class Occupant:
    """``count`` alike pods on ``node``: one other pod, or one role of a running gang there."""

    node: str
    namespace: str
    labels: Mapping[str, str]
    count: int = 1
    constraints: PodConstraints = NO_CONSTRAINTS
    terminating: bool = False
    owner: str = ""  # the running gang's id; "" for pods of other schedulers
    #: Label keys not all of these pods carry alike (a role's ``mixed_labels``).
    mixed: frozenset[str] = frozenset()

    def may_match(self, selector: LabelSelector) -> bool:
        """Could some of these pods match? (A selector reading a mixed key: assume so.)"""
        if self.mixed and selector.keys & self.mixed:
            return not selector.nothing
        return selector.matches(self.labels)

    def surely_matches(self, selector: LabelSelector) -> bool:
        """Do all of these pods match?"""
        if self.mixed and selector.keys & self.mixed:
            return False
        return selector.matches(self.labels)


def gang_occupants(rg: RunningGang) -> tuple[Occupant, ...]:
    """A running gang's members as occupants, one per (role, node)."""
    roles = {r.name: r for r in rg.gang.roles}
    out = []
    for role_name, node, count in rg.members:
        role = roles.get(role_name)
        if role is None:
            continue
        out.append(Occupant(node, rg.gang.namespace, role.labels, count,
                            role.requirements.constraints, rg.terminating, rg.id,
                            role.mixed_labels))
    return tuple(out)


def _has_anti(occupants: Iterable[Occupant]) -> bool:
    return any(o.constraints.anti_affinity for o in occupants)


class _Index:
    """Occupants by (label, value), by node, and those with required anti-affinity.

    A copy shares its parent's lists and replaces a list before changing it (copy on
    write), so bringing an index forward by one gang costs what that gang touches.
    """

    __slots__ = ("anti", "by_node", "by_pair", "owned", "owners")

    def __init__(self) -> None:
        self.by_pair: dict[tuple[str, str], list[Occupant]] = {}
        self.by_node: dict[str, list[Occupant]] = {}
        self.anti: list[Occupant] = []
        self.owners: dict[str, tuple[Occupant, ...]] = {}  # running gang id -> occupants
        self.owned: set[object] = set()  # keys (and "anti") whose lists are this index's own

    def copy(self) -> _Index:
        new = _Index()
        new.by_pair, new.by_node = dict(self.by_pair), dict(self.by_node)
        new.anti, new.owners = self.anti, dict(self.owners)
        return new

    def _own(self, table: dict[_K, list[Occupant]], key: _K) -> list[Occupant]:
        lst = table.get(key)
        tag = (id(table), key)
        if lst is None or tag not in self.owned:
            lst = table[key] = list(lst or ())
            self.owned.add(tag)
        return lst

    def add(self, occupants: Iterable[Occupant]) -> None:
        for o in occupants:
            for pair in o.labels.items():
                self._own(self.by_pair, pair).append(o)
            self._own(self.by_node, o.node).append(o)
            if o.constraints.anti_affinity:
                if "anti" not in self.owned:
                    self.anti = list(self.anti)
                    self.owned.add("anti")
                self.anti.append(o)

    def remove(self, occupants: Iterable[Occupant]) -> None:
        gone = tuple(occupants)
        if not gone:
            return
        ids = {id(o) for o in gone}
        for o in gone:
            for pair in o.labels.items():
                self.by_pair[pair] = [x for x in self.by_pair.get(pair, ()) if id(x) not in ids]
                self.owned.add((id(self.by_pair), pair))
            self.by_node[o.node] = [x for x in self.by_node.get(o.node, ()) if id(x) not in ids]
            self.owned.add((id(self.by_node), o.node))
        if any(o.constraints.anti_affinity for o in gone):
            self.anti = [x for x in self.anti if id(x) not in ids]
            self.owned.add("anti")


class Occupancy:
    """The running pods of one snapshot (see module docstring)."""

    __slots__ = ("_added", "_has_anti", "_index", "_others", "_parent", "_removed", "_running")

    def __init__(self, others: tuple[Occupant, ...], running: Mapping[str, RunningGang]) -> None:
        self._others = others
        self._running = running
        self._parent: Occupancy | None = None
        self._added: tuple[RunningGang, ...] = ()
        self._removed: tuple[str, ...] = ()
        self._index: _Index | None = None
        self._has_anti = _has_anti(others) or any(
            r.requirements.constraints.anti_affinity for rg in running.values()
            for r in rg.gang.roles)

    def derive(self, running: Mapping[str, RunningGang], added: tuple[RunningGang, ...],
               removed: tuple[str, ...]) -> Occupancy:
        """The occupancy after *removed* gangs left and *added* ones started (O(1))."""
        new = Occupancy.__new__(Occupancy)
        new._others, new._running = self._others, running
        new._parent, new._added, new._removed, new._index = self, added, removed, None
        new._has_anti = self._has_anti or any(
            r.requirements.constraints.anti_affinity for rg in added for r in rg.gang.roles)
        return new

    @property
    def has_anti_affinity(self) -> bool:
        """Might some running pod's required anti-affinity exclude an incoming pod? (False
        means certainly not; True may be stale after its pods left.)"""
        return self._has_anti

    def _built(self) -> _Index:
        if self._index is not None:
            return self._index
        parent = self._parent
        if parent is not None and parent._index is not None:
            index = parent._index.copy()
            for gid in self._removed:
                index.remove(index.owners.pop(gid, ()))
            for rg in self._added:
                index.remove(index.owners.pop(rg.id, ()))
                occ = gang_occupants(rg)
                index.owners[rg.id] = occ
                index.add(occ)
        else:
            index = _Index()
            index.add(self._others)
            for gid in sorted(self._running):
                occ = gang_occupants(self._running[gid])
                index.owners[gid] = occ
                index.add(occ)
        self._index = index
        self._parent = None  # the chain is not needed any more
        return index

    def matching(self, selector: LabelSelector) -> Iterator[Occupant]:
        """Occupants some of whose pods may match *selector* (namespaces not checked)."""
        if selector.nothing:
            return iter(())
        index = self._built()
        keys = selector.index_keys()
        if keys is None:
            seen = (o for lst in index.by_node.values() for o in lst)
        else:
            seen = (o for k in keys for o in index.by_pair.get(k, ()))
        return (o for o in seen if o.may_match(selector))

    def on(self, node: str) -> tuple[Occupant, ...]:
        return tuple(self._built().by_node.get(node, ()))

    def with_anti_affinity(self) -> tuple[Occupant, ...]:
        """Occupants whose pods carry required anti-affinity terms."""
        return tuple(self._built().anti) if self._has_anti else ()

    def all(self) -> Iterator[Occupant]:
        return (o for lst in self._built().by_node.values() for o in lst)
