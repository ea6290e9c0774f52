"""``decide`` makes the decisions recorded before the decision core was redesigned.

Each replay (a seeded scenario over three cycles, or every cycle of a short simulated run
per policy) is compared digest by digest with ``tests/unit/recorded/plans.json``: binds and
their pod -> node maps, evictions, nominations, reservations, every pending reason, the
order and the per-queue status. A refactoring of the core must leave them all equal; a
change that means to decide differently records them again (see the README there).
"""

from __future__ import annotations

import json

import pytest

from tests.unit.recorded import record

RECORDED: dict[str, list[str]] = json.loads(record.RECORD.read_text())


def test_every_replay_is_recorded() -> None:
    assert sorted(RECORDED) == sorted(record.names())


@pytest.mark.parametrize("name", record.names())
def test_the_plans_are_the_recorded_ones(name: str) -> None:
    got = record.replay(name)
    want = RECORDED[name]
    assert len(got) == len(want), f"{name}: {len(got)} cycles, {len(want)} recorded"
    for cycle, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, f"{name}: cycle {cycle + 1} of {len(want)} decides differently"
