"""When ``Backoffs`` lets held members go (``due``, ``release_all``) and when a backoff after a
bind that got no reply ends, table-driven over a bind's outcome (the rest of
``scheduler.run.backoff``: ``tests/unit/test_backoff.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from scheduler.decide.plan import Bind
from scheduler.model import PodRef
from scheduler.placement.types import Placement
from scheduler.run.backoff import Backoffs
from scheduler.run.inflight import ApplyResult

KEPT = (PodRef("ns", "g-0", "u0"), PodRef("ns", "g-1", "u1"))
BIND = Bind("ns/g", "team", Placement("ns/g", ()),
            pod_nodes=tuple((ref, "n1") for ref in KEPT))


@dataclass
class Case:
    name: str
    result: ApplyResult
    answering: bool  # does the cluster answer at 101 s
    #: (time, members let go then): ``due`` asked at each time in turn.
    due: list[tuple[float, tuple[PodRef, ...]]]
    backing_off_at_101: bool


CASES = [
    Case("held members are let go once their retry is due, and once only",
         ApplyResult(failed={"ns/g": "503"}), False,
         [(104.0, ()), (105.0, KEPT), (106.0, ())], True),
    Case("no reply at all: let go as soon as the cluster answers",
         ApplyResult(failed={"ns/g": "timeout"}, unanswered=("ns/g",)), True,
         [(101.0, KEPT), (102.0, ())], False),
    Case("no reply, the cluster still away: held until the delay ends",
         ApplyResult(failed={"ns/g": "timeout"}, unanswered=("ns/g",)), False,
         [(101.0, ()), (105.0, KEPT)], True),
    Case("a reply that refused: an answer ends nothing early",
         ApplyResult(failed={"ns/g": "503"}), True, [(101.0, ()), (105.0, KEPT)], True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_held_members_let_go(case: Case) -> None:
    backoffs = Backoffs(initial=5, answering=lambda: case.answering)
    backoffs.take(BIND, case.result, KEPT, 100.0)
    assert ("ns/g" in backoffs.until(101.0)) is case.backing_off_at_101
    for at, members in case.due:
        assert tuple(backoffs.due(at)) == members, at


def test_stepping_down_lets_every_held_member_go_once() -> None:
    backoffs = Backoffs(initial=5)
    backoffs.take(BIND, ApplyResult(failed={"ns/g": "503"}), KEPT, 100.0)
    other = (PodRef("ns", "h-0", "u2"),)
    backoffs.take(Bind("ns/h", "team", Placement("ns/h", ())),
                  ApplyResult(failed={"ns/h": "503"}), other, 100.0)
    assert set(backoffs.release_all()) == {*KEPT, *other}  # their retry not yet due
    assert backoffs.release_all() == [] and backoffs.due(200.0) == []
