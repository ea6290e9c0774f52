"""Typed memo slots, one store that holds them, and the last answer kept by identity.

A *slot* (``Slot[K, V]``) is declared at module level next to the function whose answers it
keeps, with its bound; the code that computes a value owns its slot (kube-scheduler's
``CycleState`` keys are the model). A ``Slots`` store holds the tables of any number of
slots, so whoever owns a store (a cycle's ``Memo``) does not need to know what is kept in it.

One bounding policy: a slot's table is cleared when it holds ``bound`` entries and one more
is to be added. Size rule: the bound is the number of distinct keys one owner of the store
may ask about in its life (a cycle: its ledgers times its shapes), so that clearing is a
guard against a run away, not a working-set policy; ``BOUND`` unless the slot says
otherwise (a smaller bound where each key holds a large value alive). Every slot keeps a
pure function of its key, so clearing changes no answer; what is the same for the store's
whole life (a cycle's policies, its running gangs) need not be part of a key. A slot used
through ``Slots.last`` keeps one entry.

``Last`` keeps the last (input, result) and gives the result again while the input is the
very same object (compared with ``is``): the idiom for values worked out from an immutable
input that changes rarely (the queue set, a plan, the nominated nodes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

_K = TypeVar("_K")
_V = TypeVar("_V")
_I = TypeVar("_I")

#: The bound of a slot that names none.
BOUND = 4096
_MISSING: Any = object()


class Slot(Generic[_K, _V]):
    """A typed key of a ``Slots`` store: its table maps ``_K`` to ``_V``. Compared by
    identity, so two slots of one name are still two slots."""

    __slots__ = ("bound", "name")

    def __init__(self, name: str, bound: int = BOUND) -> None:
        self.name, self.bound = name, bound

    def __repr__(self) -> str:
        return f"Slot({self.name!r}, bound={self.bound})"


class Slots:
    """The tables of the slots asked about, each bounded by its slot (see the module
    docstring)."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[Slot[Any, Any], dict[Any, Any]] = {}

    def table(self, slot: Slot[_K, _V]) -> dict[_K, _V]:
        """The slot's table, to read (write through ``put`` or ``get``)."""
        table = self._tables.get(slot)
        if table is None:
            table = self._tables[slot] = {}
        return cast(dict[_K, _V], table)

    def put(self, slot: Slot[_K, _V], key: _K, value: _V) -> _V:
        """Keep *value* for *key* (clearing the table first if it is full); returns it."""
        table = self.table(slot)
        if len(table) >= slot.bound:
            table.clear()
        table[key] = value
        return value

    def get(self, slot: Slot[_K, _V], key: _K, make: Callable[[], _V]) -> _V:
        """The value kept for *key*, made (and kept) on the first ask."""
        table = self.table(slot)
        hit = table.get(key, _MISSING)
        if hit is _MISSING:
            hit = self.put(slot, key, make())
        return cast(_V, hit)

    def last(self, slot: Slot[_I, _V], input: _I, make: Callable[[_I], _V]) -> _V:
        """``Last.get`` in the store: the slot keeps only its last (input, result)."""
        held = self._tables.get(slot)
        if held is None:
            held = self._tables[slot] = cast(Any, Last())
        return cast(Last[_I, _V], held).get(input, make)

    def clear(self) -> None:
        self._tables.clear()


class Last(Generic[_I, _V]):
    """The last (input, result): ``get(input, make)`` gives the result again while *input*
    is the same object, else ``make(input)`` (kept in its place)."""

    __slots__ = ("_input", "_value")

    def __init__(self) -> None:
        self._input: Any = _MISSING
        self._value: Any = None

    def get(self, input: _I, make: Callable[[_I], _V]) -> _V:
        if self._input is not input:
            self._value = make(input)
            self._input = input
        return cast(_V, self._value)

    def peek(self, input: _I) -> _V | None:
        """The result kept for *input* if it is the last input, else None."""
        return cast(_V, self._value) if self._input is input else None
