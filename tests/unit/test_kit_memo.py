"""scheduler.kit.memo: typed slots in one store, one bounding policy, the last answer."""

from __future__ import annotations

from functools import partial

from scheduler.kit.memo import BOUND, Last, Slot, Slots, kept_for

SQUARES: Slot[int, int] = Slot("squares", bound=3)
NAMES: Slot[int, str] = Slot("names")


def test_a_slot_keeps_what_was_made_for_its_key() -> None:
    slots, made = Slots(), []

    def square(n: int) -> int:
        made.append(n)
        return n * n

    assert [slots.get_or_make(SQUARES, n, partial(square, n)) for n in (2, 2, 3, 2)] == [4, 4, 9, 4]
    assert made == [2, 3]


def test_slots_are_apart_even_under_one_key() -> None:
    slots = Slots()
    slots.put(SQUARES, 1, 1)
    slots.put(NAMES, 1, "one")
    assert slots.table(SQUARES) == {1: 1} and slots.table(NAMES) == {1: "one"}
    assert Slot("squares").bound == BOUND


def test_a_full_table_is_cleared_before_one_more() -> None:
    slots = Slots()
    for n in range(3):
        slots.put(SQUARES, n, n * n)
    assert len(slots.table(SQUARES)) == 3
    slots.put(SQUARES, 9, 81)
    assert slots.table(SQUARES) == {9: 81}


def test_a_value_of_none_is_kept() -> None:
    slot: Slot[int, None] = Slot("nothing")
    slots, made = Slots(), []
    for _ in range(2):
        slots.get_or_make(slot, 0, lambda: made.append(0))
    assert made == [0]


def test_last_answers_again_only_for_the_same_object() -> None:
    last: Last[tuple[int, ...], int] = Last()
    a, b = (1, 2), tuple([1, 2])
    made = []

    def total(t: tuple[int, ...]) -> int:
        made.append(t)
        return sum(t)

    assert last.get(a, total) == 3 and last.get(a, total) == 3 and made == [a]
    assert last.peek(a) == 3 and last.peek(b) is None  # equal, not the same object
    assert last.get(b, total) == 3 and len(made) == 2


def test_kept_for_answers_only_for_the_very_object() -> None:
    table: dict[str, tuple[list[int], int]] = {}
    a, b = [1, 2], [1, 2]
    assert kept_for(table, "k", a, sum) == 3 and table["k"][0] is a
    table["k"] = (a, 99)  # kept: answered again for a, not for an equal b
    assert kept_for(table, "k", a, sum) == 99
    assert kept_for(table, "k", b, sum) == 3 and table["k"][0] is b


def test_kept_for_clears_a_full_table_and_works_in_a_slot() -> None:
    table: dict[int, tuple[str, int]] = {i: ("x", i) for i in range(2)}
    kept_for(table, 5, "y", len, bound=2)
    assert table == {5: ("y", 1)}
    slot: Slot[int, tuple[str, int]] = Slot("lengths")
    slots = Slots()
    assert slots.kept_for(slot, 1, "abc", len) == 3 and slots.table(slot) == {1: ("abc", 3)}


def test_slots_last_keeps_one_entry() -> None:
    slot: Slot[tuple[int, ...], int] = Slot("last total")
    slots, t = Slots(), (1, 2)
    assert slots.last(slot, t, sum) == 3 and slots.last(slot, t, lambda _: 0) == 3
    assert slots.last(slot, (5,), sum) == 5
    last: Last[int, str] = Last()
    last.put(1, "one")
    assert last.peek(1) == "one" and last.get(1, str) == "one"
