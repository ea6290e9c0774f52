"""A starvation threshold for reservations (``reservation.afterSeconds`` and a queue's
``queueing.reserveAfterSeconds``): a gang gets a reservation only once it has been pending
that long; before, it waits while later gangs start wherever they fit.

The cluster of ``test_reservations_per_pool``: in each pool of three 8-GPU nodes the first runs a
gang until a known time and the last one a gang with no known end, so a gang of two 8-GPU pods
fits only once the first ends, and the middle node is free for a one-node gang meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from policies import parsing
from policies.queues import Queue, QueueingPolicy, SchedulerPolicy
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.model import Gang
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

R = ReasonCategory
NOW = 10_000.0
NODES = nodes("a100", 3)
BUSY = (running(gang("ra", "q", pool="a100"), {"a100-0000": 1}, end=NOW + 1000),
        running(gang("la", "q", pool="a100"), {"a100-0002": 1}))
Q = queue("q", quota={"a100": 64})
BIG = gang("big", "q", pods=2, pool="a100", created=NOW - 600)  # pending 10 minutes
SMALL = gang("small", "q", pool="a100", created=NOW - 60)  # no runtime estimate: runs "forever"


def run(pending: Sequence[Gang], after: float = 0.0, queues: Sequence[Queue] = (Q,),
        previous: CyclePlan | None = None, now: float = NOW) -> CyclePlan:
    return decide(Snapshot(NODES, BUSY), pending,
                  policies(*queues, preemption=False, reserve_after_seconds=after),
                  now, previous, solver=SOLVE)


def with_threshold(q: Queue, after: float | None) -> Queue:
    return replace(q, queueing=replace(q.queueing, reserve_after_seconds=after))


def test_zero_is_todays_behaviour_a_reservation_at_once() -> None:
    plan = run([BIG, SMALL])
    assert [r.gang_id for r in plan.reservations] == ["ns/big"]
    assert plan.pending["ns/big"].category is R.RESERVED
    assert not plan.binds  # small would still run when big should start: kept off its nodes
    assert plan.pending["ns/small"].category is R.QUEUED


def test_a_gang_younger_than_the_threshold_gets_none_and_backfill_takes_the_nodes() -> None:
    plan = run([BIG, SMALL], after=900.0)
    assert plan.reservations == ()
    assert [b.gang_id for b in plan.binds] == ["ns/small"]
    reason = plan.pending["ns/big"]
    assert reason.category is R.PLACEMENT
    assert "no reservation before it has been pending 900s (reserveAfterSeconds)" in \
        reason.message


def test_once_older_than_the_threshold_it_reserves_and_keeps_its_reservation() -> None:
    young = run([BIG, SMALL], after=900.0, now=NOW + 299)
    assert young.reservations == ()
    plan = run([BIG, SMALL], after=900.0, now=NOW + 300)  # pending exactly 900 s
    assert [r.gang_id for r in plan.reservations] == ["ns/big"]
    assert not plan.binds
    again = run([BIG, SMALL], after=900.0, previous=plan, now=NOW + 400)
    assert [r.gang_id for r in again.reservations] == ["ns/big"]


@pytest.mark.parametrize(("global_after", "queue_after", "reserved"), [
    (0.0, 900.0, False),  # the queue waits longer than the scheduler's default
    (900.0, 0.0, True),  # the queue reserves at once although the default waits
    (900.0, None, False),  # no setting of its own: the scheduler's
    (300.0, None, True),
])
def test_a_queue_setting_overrides_the_scheduler_policy(
        global_after: float, queue_after: float | None, reserved: bool) -> None:
    plan = run([BIG, SMALL], after=global_after, queues=(with_threshold(Q, queue_after),))
    assert bool(plan.reservations) is reserved
    assert [b.gang_id for b in plan.binds] == ([] if reserved else ["ns/small"])


def test_reservations_off_stay_off_whatever_the_threshold() -> None:
    plan = decide(Snapshot(NODES, BUSY), [BIG, SMALL],
                  policies(with_threshold(Q, 0.0), preemption=False, reservation=False),
                  NOW, solver=SOLVE)
    assert plan.reservations == ()


def test_a_young_gang_ahead_in_order_does_not_cost_an_old_one_its_reservation() -> None:
    """Same shape, so the failure memo would hand the young gang's answer (no reservation) to
    the old one, were whether a gang may reserve not part of its key."""
    young = gang("young", "q", pods=2, pool="a100", priority=1, created=NOW - 60)
    old = gang("old", "q", pods=2, pool="a100", created=NOW - 3600)
    plan = run([young, old], after=900.0)  # young goes first: higher priority
    assert plan.order[:2] == ("ns/young", "ns/old")
    assert [r.gang_id for r in plan.reservations] == ["ns/old"]
    assert plan.pending["ns/young"].category is R.PLACEMENT  # it came first, with no one


def test_a_creation_time_ahead_of_the_clock_still_reserves_at_zero() -> None:
    ahead = replace(BIG, creation_time=NOW + 5)  # the apiserver's clock a little ahead
    assert [r.gang_id for r in run([ahead]).reservations] == ["ns/big"]


def policy_obj(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "SchedulerPolicy",
            "metadata": {"name": "p"}, "spec": spec}


def queue_obj(**queueing: Any) -> dict[str, Any]:
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "team-a"}, "spec": {"namespaces": ["*"], "queueing": queueing}}


@pytest.mark.parametrize(("reservation", "expected"), [
    (None, (True, 0.0)),
    (True, (True, 0.0)),
    (False, (False, 0.0)),
    ({"afterSeconds": 900}, (True, 900.0)),
    ({"afterSeconds": 0}, (True, 0.0)),
    ({}, (True, 0.0)),
])
def test_the_boolean_and_the_mapping_form_parse(reservation: Any,
                                                expected: tuple[bool, float]) -> None:
    spec = {} if reservation is None else {"reservation": reservation}
    policy, errors = parsing.parse_scheduler_policy(policy_obj(**spec))
    assert errors == [] and policy is not None
    assert (policy.reservation, policy.reserve_after_seconds) == expected
    assert policy.max_reservations == 1  # one reserved gang at a time unless asked


def test_max_gangs_parses() -> None:
    policy, errors = parsing.parse_scheduler_policy(
        policy_obj(reservation={"afterSeconds": 60, "maxGangs": 3}))
    assert errors == [] and policy is not None
    assert (policy.reserve_after_seconds, policy.max_reservations) == (60.0, 3)


def test_the_mapping_form_turns_reservations_on_over_a_preset_without_them() -> None:
    policy, errors = parsing.parse_scheduler_policy(
        policy_obj(preset="greedy-gang", reservation={"afterSeconds": 3600}))
    assert errors == [] and policy is not None
    assert policy.reservation and policy.reserve_after_seconds == 3600.0


@pytest.mark.parametrize(("reservation", "path", "reason"), [
    ({"afterSeconds": -1}, "spec.reservation.afterSeconds", "must be >= 0, got -1"),
    ({"afterSeconds": "1h"}, "spec.reservation.afterSeconds", "must be a number, got '1h'"),
    ({"afterSeconds": True}, "spec.reservation.afterSeconds", "must be a number, got True"),
    ({"after": 60}, "spec.reservation.after", "unknown field (known: afterSeconds, maxGangs)"),
    ("yes", "spec.reservation", "must be true, false or {afterSeconds: N, maxGangs: K}, got 'yes'"),
    (900, "spec.reservation", "must be true, false or {afterSeconds: N, maxGangs: K}, got 900"),
    ({"maxGangs": 0}, "spec.reservation.maxGangs", "must be a whole number >= 1, got 0"),
    ({"maxGangs": 1.5}, "spec.reservation.maxGangs", "must be a whole number >= 1, got 1.5"),
    ({"maxGangs": True}, "spec.reservation.maxGangs", "must be a whole number >= 1, got True"),
    ({"maxGangs": "2"}, "spec.reservation.maxGangs", "must be a whole number >= 1, got '2'"),
])
def test_scheduler_policy_errors_name_the_field(reservation: Any, path: str,
                                                 reason: str) -> None:
    policy, errors = parsing.parse_scheduler_policy(policy_obj(reservation=reservation))
    assert policy is None
    assert [(e.path, e.reason) for e in errors] == [(path, reason)]


def test_queue_setting_parses_and_defaults_to_the_scheduler_policy() -> None:
    queue_, errors = parsing.parse_queue(queue_obj(reserveAfterSeconds=1800))
    assert errors == [] and queue_ is not None
    assert queue_.queueing.reserve_after_seconds == 1800.0
    assert queue_.reserve_after(SchedulerPolicy(reserve_after_seconds=60)) == 1800.0
    default, _ = parsing.parse_queue(queue_obj())
    assert default is not None and default.queueing == QueueingPolicy()
    assert default.reserve_after(SchedulerPolicy(reserve_after_seconds=60)) == 60.0


@pytest.mark.parametrize(("value", "reason"), [
    (-5, "must be >= 0, got -5"),
    ("15m", "must be a number, got '15m'"),
    (None, None),
])
def test_queue_setting_errors_name_the_field(value: Any, reason: str | None) -> None:
    _, errors = parsing.parse_queue(queue_obj(reserveAfterSeconds=value))
    expected = [] if reason is None else [("spec.queueing.reserveAfterSeconds", reason)]
    assert [(e.path, e.reason) for e in errors] == expected
