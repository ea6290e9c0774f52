"""Quota pending messages: never a negative "available", and held quota named as such.

A reservation sets the reserved gang's quota aside (``QuotaLedger.hold``); a later gang that
may not use it used to read "needs 8 nvidia.com/gpu, -8 available (nominal 16, in use 24)".
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.admission import admissible_pools, check_charges
from policies.queues import QueueSet
from policies.quota import QuotaLedger, QuotaTree
from scheduler.decide.cycle import decide
from scheduler.model.resources import GPU, Resources
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

NEGATIVE = re.compile(r"-\d+ available")


def ledger(*queues: object) -> QuotaLedger:
    return QuotaLedger.empty(QuotaTree.build(QueueSet.of(queues)))  # type: ignore[arg-type]


def test_a_gang_behind_a_reservation_is_told_what_holds_the_quota() -> None:
    """The reported case: quota 16, 8 in use, 16 held for the reserved gang."""
    now = 10_000.0
    r0 = running(gang("r0", "q"), {"a100-0000": 1}, end=now + 1000)
    big, small = gang("big", "q", pods=2, created=1.0), gang("small", "q", created=2.0)
    plan = decide(Snapshot(nodes("a100", 4), [r0]), [big, small],
                  policies(queue("q", quota={"a100": 16})), now, solver=SOLVE)
    assert plan.reservation_of("ns/big") is not None
    message = plan.pending["ns/small"].message
    assert not NEGATIVE.search(message), message
    assert ("needs 8 nvidia.com/gpu, 0 available (nominal 16, in use 8, 16 held for reserved "
            "gang ns/big)") in message, message


SOLO = (queue("q", quota={"a100": 16}),)
COHORT = (queue("p"), queue("a", "p", quota={"a100": 16}), queue("b", "p", quota={"a100": 16}))


@pytest.mark.parametrize(("queues", "used", "holds", "asker", "want"), [
    # (queue, GPUs) in use; (holder queue, gang, GPUs) held; the queue asking for 8 GPUs.
    (SOLO, [("q", 8)], [], "q", "needs 16 nvidia.com/gpu, 8 available (nominal 16, in use 8)"),
    (SOLO, [("q", 8)], [("q", "ns/big", 16)], "q",
     "needs 8 nvidia.com/gpu, 0 available (nominal 16, in use 8, 16 held for reserved gang "
     "ns/big)"),
    (SOLO, [], [("q", "ns/big", 12)], "q",
     "needs 8 nvidia.com/gpu, 4 available (nominal 16, in use 0, 12 held for reserved gang "
     "ns/big)"),
    # A sibling's reservation borrows a's idle quota: a is told who holds it.
    (COHORT, [("a", 8)], [("b", "ns/big", 24)], "a",
     "needs 8 nvidia.com/gpu, 0 available (nominal 16, in use 8, 24 held for reserved gang "
     "ns/big of queue b)"),
])
def test_shortfall_messages(queues: tuple[object, ...], used: list[tuple[str, int]],
                            holds: list[tuple[str, str, int]], asker: str, want: str) -> None:
    led = ledger(*queues)
    for name, n in used:
        led = led.charge(name, "a100", {GPU: n})
    for name, holder, n in holds:
        led = led.hold(name, "a100", {GPU: n}, holder)
    request = 16 if not holds else 8
    problem = check_charges(led.tree.queues.queues[asker], led, {"a100": Resources({GPU: request})})
    assert problem is not None and want in problem, problem
    verdict = admissible_pools(gang("x", asker), led.tree.queues.queues[asker], led,
                               {"a100": Resources({GPU: request})})
    assert not verdict.admitted and want in verdict.message


def test_holding_charges_like_usage_and_releasing_keeps_the_record_honest() -> None:
    led = ledger(*SOLO)
    held = led.hold("q", "a100", {GPU: 8}, "ns/big")
    assert held.usage("q", "a100") == led.charge("q", "a100", {GPU: 8}).usage("q", "a100")
    assert held.available("q", "a100") == {GPU: 8}
    assert held.held("q", "a100") == (("ns/big", "q", Resources({GPU: 8})),)
    assert led.held("q", "a100") == ()
    # Charging more afterwards keeps the record of what is held.
    assert held.charge("q", "a100", {GPU: 4}).held("q", "a100") == held.held("q", "a100")


@settings(max_examples=80, deadline=None)
@given(used=st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 24)), max_size=4),
       holds=st.lists(st.tuples(st.sampled_from("ab"), st.integers(1, 40)), max_size=3),
       request=st.integers(1, 48))
def test_available_is_never_negative_nor_said_to_be(used: list[tuple[str, int]],
                                                    holds: list[tuple[str, int]],
                                                    request: int) -> None:
    led = ledger(*COHORT)
    for name, n in used:
        led = led.charge(name, "a100", {GPU: n})
    for i, (name, n) in enumerate(holds):
        led = led.hold(name, "a100", {GPU: n}, f"ns/r{i}")
    for name in "ab":
        assert led.available(name, "a100")[GPU] >= 0
        problem = check_charges(led.tree.queues.queues[name], led,
                                {"a100": Resources({GPU: request})})
        assert problem is None or not NEGATIVE.search(problem), problem
