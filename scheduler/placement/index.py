"""Eligible nodes bucketed by free GPUs, kept in step with the snapshot incrementally.

Free GPUs here are ``Snapshot.free_gpus``: free ``nvidia.com/gpu`` plus free devices of the
node's own ResourceSlices, so pods whose GPUs are device claims get best fit too.

Placing 1,000 single-GPU pods one after another must not rescan 1,000 nodes per pod: the
best-fit node is the first one, in (free GPUs, name) order, with enough of everything.
A ``FreeIndex`` keeps the eligible nodes of one selection (nodeSelector, affinity,
tolerations) in buckets per free-GPU count. It lives in the snapshot's ``NodeIndex`` (shared
by every snapshot of the same nodes) and records the ``lineage`` of the snapshot it last
served; moving to another snapshot of that family touches only the nodes that changed in
between (``Snapshot.lineage``), or rebuilds when the two are not closely related.

The buckets only order the search; every caller still checks the snapshot's actual free
resources, so an index can make a placement worse if it were wrong, never over capacity.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from scheduler.kit.memo import Slot
from scheduler.model import PodRequirements
from scheduler.model.demand import gpus_of
from scheduler.model.resources import EMPTY

if TYPE_CHECKING:
    from scheduler.world.snapshot import Snapshot

#: Selection key: the requirements minus their requests (what decides eligibility).
SelectionKey = tuple[object, ...]

#: Selection -> the free-GPU index of its eligible nodes (kept in the node index). Not a
#: memo but state synced to each snapshot, costly to rebuild: the one slot whose table is
#: kept in recency order, the least recently used index dropped beyond its bound.
FREE: Slot[object, FreeIndex] = Slot("index.free", bound=64)


def selection_key(requirements: PodRequirements) -> SelectionKey:
    """Pods that differ only in their requests share one index."""
    return (tuple(sorted(requirements.node_selector.items())), requirements.affinity_terms,
            requirements.tolerations)


class FreeIndex:
    """Node names by free GPUs (ascending), names sorted inside each bucket."""

    __slots__ = ("_buckets", "_key_of", "_keys", "_lineage", "_names")

    def __init__(self, names: Iterable[str]) -> None:
        self._names: tuple[str, ...] = tuple(sorted(names))
        self._buckets: dict[int, list[str]] = {}
        self._keys: list[int] = []
        self._key_of: dict[str, int] = {}
        self._lineage: Mapping[int, frozenset[str]] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def sync(self, snapshot: Snapshot) -> None:
        """Bring the buckets to *snapshot*'s free resources."""
        lineage = snapshot.lineage
        if lineage is self._lineage:
            return
        changed: frozenset[str] | None = None
        mine = self._lineage
        for version, since in lineage.items():
            other = mine.get(version)
            if other is not None:
                changed = since | other
                break
        if changed is None or 4 * len(changed) > len(self._names):
            self._rebuild(snapshot)
        else:
            key_of = self._key_of
            free_gpus = snapshot.free_gpus
            for name in changed:
                old = key_of.get(name)
                if old is not None:
                    new = free_gpus(name)
                    if new != old:
                        self._move(name, old, new)
        self._lineage = lineage

    def _rebuild(self, snapshot: Snapshot) -> None:
        buckets: dict[int, list[str]] = {}
        key_of: dict[str, int] = {}
        free = snapshot.free_by_node.get  # ``Snapshot.free`` without its frame: every node
        inventory = snapshot.volumes.devices
        devices = inventory.free_by_node() if inventory.slices else {}
        for name in self._names:
            key = gpus_of(free(name, EMPTY))
            if devices:
                key += devices.get(name, 0)
            if key < 0:
                key = 0
            key_of[name] = key
            bucket = buckets.get(key)
            if bucket is None:
                buckets[key] = [name]
            else:
                bucket.append(name)
        self._buckets, self._key_of, self._keys = buckets, key_of, sorted(buckets)

    def _move(self, name: str, old: int, new: int) -> None:
        self._buckets[old].remove(name)
        bucket = self._buckets.get(new)
        if bucket is None:
            self._buckets[new] = [name]
            insort(self._keys, new)
        else:
            insort(bucket, name)
        self._key_of[name] = new

    def ascending(self, min_gpus: int = 0) -> Iterator[str]:
        """Names with at least *min_gpus* free GPUs, by (free GPUs, name): best fit first."""
        buckets = self._buckets
        for key in self._keys:
            if key >= min_gpus:
                yield from buckets[key]

    def free_gpus(self, name: str) -> int:
        return self._key_of[name]


def free_index(snapshot: Snapshot, key: object, names: Iterable[str]) -> FreeIndex:
    """The index for selection *key* over *names*, synced to *snapshot* (built on first use)."""
    indexes = snapshot.index.slots.table(FREE)
    index = indexes.pop(key, None)
    if index is None:
        index = FreeIndex(names)
        if len(indexes) >= FREE.bound:
            del indexes[next(iter(indexes))]
    indexes[key] = index  # re-inserted last: the dict's order is the recency order
    index.sync(snapshot)
    return index
