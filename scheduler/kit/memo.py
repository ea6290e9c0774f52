"""Typed memo slots, one store that keeps them, and the last answer kept by identity.

A *slot* (``Slot[K, V]``) is declared at module level next to the function whose answers it
keeps, with its bound; the code that computes a value owns its slot (kube-scheduler's
``CycleState`` keys are the model). A ``Slots`` store keeps the tables of any number of
slots, so whoever owns a store (a cycle's ``Memo``) does not need to know what is kept in it.

One bounding policy: a slot's table is cleared when it has ``bound`` entries and one more
is to be added. One size rule, in three tiers: ``BOUND`` (4096, the default) for a table
keyed by what one owner of the store asks about in its life (shapes, params, label keys);
``LARGE`` (100,000) for a table with an entry per gang or roles object; 64 where each entry
keeps a large value alive (a whole ledger, a free-GPU index). Clearing is a guard against a
run away, not a working-set policy. Every slot keeps a pure function of its key, so
clearing changes no answer; what is the same for the store's whole life (a cycle's
policies, its running gangs) need not be part of a key. A slot used through ``Slots.last``
keeps one entry. (The one exception, ``placement.index.FREE``, keeps state synced to each
snapshot rather than answers, costly to rebuild: it drops the least recently used.
``fairshare.RANKS`` leaves the ledger out of its key and checks the entries it read.)

A store lives as long as its owner: a cycle (``Memo.slots``), a node index, or the process
for pure functions of texts (a module's own store: quantity strings in ``model.resources``,
pod spec shapes in ``kube.read.convert``, which had ``functools.lru_cache`` and its own
policy). What is not a slot says why where it is kept (``Recall.ledger`` and
``Recall.admissible``, the failure memo's epoch in ``decide.memo``).

``kept_for`` keeps a result with the object it was made for, so that a table keyed by the
object's ``id`` (or by a name it may share with a newer object) answers only for that very
object; ``Slots.kept_for`` is the same in a slot.

``Last`` keeps the last (input, result) and gives the result again while the input is the
very same object (compared with ``is``): the idiom for values worked out from an immutable
input that changes rarely (the queue set, a plan, the nominated nodes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

_K = TypeVar("_K")
_V = TypeVar("_V")
_I = TypeVar("_I")

#: The bound of a slot that names none.
BOUND = 4096
#: The bound of a table with one entry per running or pending gang (or per roles object).
LARGE = 100_000
_MISSING: Any = object()


class Slot(Generic[_K, _V]):
    """A typed key of a ``Slots`` store: its table maps ``_K`` to ``_V``. Compared by
    identity, so two slots of one name are still two slots."""

    __slots__ = ("bound", "name")

    def __init__(self, name: str, bound: int = BOUND) -> None:
        self.name, self.bound = name, bound

    def __repr__(self) -> str:
        return f"Slot({self.name!r}, bound={self.bound})"


class Slots(dict[Slot[Any, Any], dict[Any, Any]]):
    """The tables of the slots asked about, each bounded by its slot (see the module
    docstring). A dict of tables, so that reading a slot's table costs one dict lookup."""

    __slots__ = ()

    def __missing__(self, slot: Slot[Any, Any]) -> dict[Any, Any]:
        table: dict[Any, Any] = {}
        self[slot] = table
        return table

    if TYPE_CHECKING:
        def table(self, slot: Slot[_K, _V]) -> dict[_K, _V]:
            """The slot's table, to read (write through ``put`` or ``get_or_make``)."""
    else:
        table = dict.__getitem__

    def put(self, slot: Slot[_K, _V], key: _K, value: _V) -> _V:
        """Keep *value* for *key* (clearing the table first if it is full); returns it."""
        table = self.table(slot)
        if len(table) >= slot.bound:
            table.clear()
        table[key] = value
        return value

    def get_or_make(self, slot: Slot[_K, _V], key: _K, make: Callable[[], _V]) -> _V:
        """The value kept for *key*, made (and kept) on the first ask.

        Millions of calls in a long simulation: no ``cast`` (a Python call) on the way out."""
        table = self.table(slot)
        hit: _V = table.get(key, _MISSING)
        if hit is _MISSING:
            hit = self.put(slot, key, make())
        return hit

    def kept_for(self, slot: Slot[_K, tuple[_I, _V]], key: _K, obj: _I,
                 make: Callable[[_I], _V]) -> _V:
        """``kept_for`` in the slot's table."""
        return kept_for(self.table(slot), key, obj, make, slot.bound)

    def last(self, slot: Slot[_I, _V], input: _I, make: Callable[[_I], _V]) -> _V:
        """``Last.get`` in the store: the slot keeps only its last (input, result)."""
        last = dict.get(self, slot)
        if last is None:
            last = self[slot] = cast(Any, Last())
        return cast(Last[_I, _V], last).get(input, make)


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

    def put(self, input: _I, value: _V) -> None:
        """Keep *value* as the result for *input* (the last one from now on)."""
        self._input, self._value = input, value

    def peek(self, input: _I) -> _V | None:
        """The result kept for *input* if it is the last input, else None."""
        return cast(_V, self._value) if self._input is input else None


def kept_for(table: dict[_K, tuple[_I, _V]], key: _K, obj: _I, make: Callable[[_I], _V],
             bound: int = BOUND) -> _V:
    """The value kept in *table* under *key* if it was made for this very *obj* (compared
    with ``is``: an equal object may be another one), else ``make(obj)``, kept with *obj*
    (which it keeps alive, so an ``id`` key is not reused while kept); the table is cleared
    first when it has *bound* entries."""
    hit = table.get(key)
    if hit is not None and hit[0] is obj:
        return hit[1]
    if len(table) >= bound:
        table.clear()
    value = make(obj)
    table[key] = (obj, value)
    return value
