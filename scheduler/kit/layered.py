"""``Layered``: an immutable map that shares its structure with the map it was derived from.

A cycle derives a snapshot per placement (``Snapshot.with_running``), and each derived
snapshot differs from its parent in a few nodes' free resources and one running gang. Copying
the per-node and per-gang dicts for each of them made a backlog of N small gangs cost N
copies of maps that grow with N (quadratic: 41x the CPU for 16x the gangs). A ``Layered`` map
is a shared *base* dict and a small *top* dict of the entries changed since (removed ones
marked); deriving copies only the top, and once the top outgrows about the square root of
the map it is folded into a new base. A derivation costs O(sqrt(n)) amortised, a read one or
two dict look-ups.

It behaves exactly as the dict the old code copied would, order included: entries iterate in
the order they were first inserted, a replaced entry keeps its place and a removed one that
comes back goes last (the case that would break that is folded first). Callers that iterate
the running gangs therefore see them in the same order as before, so decisions are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from math import isqrt
from typing import Generic, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")

_MISSING = object()
#: Marks, in the top, an entry of the base that has been removed.
_GONE = object()


class Layered(Mapping[K, V], Generic[K, V]):
    """See the module docstring. Never changed in place: ``set`` and ``without`` derive."""

    __slots__ = ("_base", "_len", "_top")

    def __init__(self, items: dict[K, V] | None = None) -> None:
        """A map of *items* (taken over, not copied: the caller gives it up)."""
        self._base: dict[K, V] = {} if items is None else items
        self._top: dict[K, object] = {}
        self._len = len(self._base)

    @classmethod
    def _of(cls, base: dict[K, V], top: dict[K, object], length: int) -> Layered[K, V]:
        if len(top) > 16 + 2 * isqrt(length):
            return cls(_fold(base, top))
        new = cls.__new__(cls)
        new._base, new._top, new._len = base, top, length
        return new

    # Reading ------------------------------------------------------------------------------
    def __getitem__(self, key: K) -> V:
        value = self._top.get(key, _MISSING)
        if value is _MISSING:
            return self._base[key]
        if value is _GONE:
            raise KeyError(key)
        return value  # type: ignore[return-value]

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, default: V | D, /) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        value = self._top.get(key, _MISSING)
        if value is _MISSING:
            return self._base.get(key, default)
        return default if value is _GONE else value

    def __contains__(self, key: object) -> bool:
        value = self._top.get(key, _MISSING)  # type: ignore[arg-type]
        if value is _MISSING:
            return key in self._base
        return value is not _GONE

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        if not self._top:
            return iter(self._base)
        return (k for k, _ in self._pairs())

    def items(self) -> Iterator[tuple[K, V]]:  # type: ignore[override]
        return iter(self._base.items()) if not self._top else self._pairs()

    def values(self) -> Iterator[V]:  # type: ignore[override]
        return iter(self._base.values()) if not self._top else (v for _, v in self._pairs())

    def _pairs(self) -> Iterator[tuple[K, V]]:
        top, base = self._top, self._base
        for k, v in base.items():
            t = top.get(k, _MISSING)
            if t is _MISSING:
                yield k, v
            elif t is not _GONE:
                yield k, t  # type: ignore[misc]
        for k, t in top.items():
            if t is not _GONE and k not in base:
                yield k, t  # type: ignore[misc]

    def differing(self, other: Layered[K, V]) -> set[K] | None:
        """Keys whose entries may differ between this map and *other* (a superset), when the
        two share their base; None when they do not."""
        if other._base is not self._base:
            return None
        return self._top.keys() | other._top.keys()

    # Deriving -----------------------------------------------------------------------------
    def set(self, pairs: Iterable[tuple[K, V]]) -> Layered[K, V]:
        """This map with *pairs* set (in order, as ``dict.__setitem__`` would)."""
        base, top, length = self._base, dict(self._top), self._len
        todo = list(pairs)
        for i, (k, v) in enumerate(todo):
            was = top.get(k, _MISSING)
            if was is _GONE:
                # Back after being removed: a dict puts it last, the base has it in its old
                # place. Fold, then set the rest on the plain dict.
                flat = _fold(base, top)
                for k2, v2 in todo[i:]:
                    flat[k2] = v2
                return Layered(flat)
            if was is _MISSING and k not in base:
                length += 1
            top[k] = v
        return Layered._of(base, top, length)

    def without(self, keys: Iterable[K]) -> Layered[K, V]:
        """This map with *keys* removed (each must be present)."""
        base, top, length = self._base, dict(self._top), self._len
        for k in keys:
            was = top.get(k, _MISSING)
            if was is _GONE or (was is _MISSING and k not in base):
                raise KeyError(k)
            if k in base:
                top[k] = _GONE
            else:
                del top[k]
            length -= 1
        return Layered._of(base, top, length)


def _fold(base: Mapping[K, V], top: Mapping[K, object]) -> dict[K, V]:
    """The plain dict of a base and a top, in the map's order."""
    out: dict[K, V] = {}
    for k, v in base.items():
        t = top.get(k, _MISSING)
        if t is _MISSING:
            out[k] = v
        elif t is not _GONE:
            out[k] = t  # type: ignore[assignment]
    for k, t in top.items():
        if t is not _GONE and k not in base:
            out[k] = t  # type: ignore[assignment]
    return out
