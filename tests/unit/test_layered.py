"""``Layered`` behaves exactly as the dict the snapshot used to copy: same entries, same
order (a replaced entry keeps its place, a removed one that comes back goes last), and the
map it was derived from is never changed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.kit.layered import Layered

_KEYS = st.integers(0, 40)
_OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), st.lists(st.tuples(_KEYS, st.integers()), max_size=4)),
    st.tuples(st.just("without"), st.lists(_KEYS, max_size=3, unique=True))), max_size=120)


@settings(max_examples=300, deadline=None)
@given(start=st.dictionaries(_KEYS, st.integers(), max_size=30), ops=_OPS)
def test_a_layered_map_is_the_dict_it_replaces_order_included(
        start: dict[int, int], ops: list[tuple[str, list]]) -> None:
    reference = dict(start)
    layered: Layered[int, int] = Layered(dict(start))
    history = [(layered, dict(reference))]
    for op, arg in ops:
        if op == "set":
            for k, v in arg:
                reference[k] = v
            layered = layered.set(arg)
        else:
            present = [k for k in arg if k in reference]
            for k in present:
                del reference[k]
            layered = layered.without(present)
        history.append((layered, dict(reference)))
    for version, expected in history:  # every earlier version is unchanged
        assert list(version.items()) == list(expected.items())
        assert list(version) == list(expected)
        assert list(version.values()) == list(expected.values())
        assert len(version) == len(expected)
        for k in range(41):
            assert (k in version) == (k in expected)
            assert version.get(k, "none") == expected.get(k, "none")
        assert version == expected


def test_removing_an_absent_key_is_an_error() -> None:
    layered = Layered({1: "a"}).without([1])
    with pytest.raises(KeyError):
        layered.without([1])
    with pytest.raises(KeyError):
        layered[1]
