"""Gang scheduling latency (``scheduler.run.latency``): from the first cycle that saw a gang
complete to the landing of its bind, table-driven over a gang's cycles; what ``landed`` logs
and observes for each outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from scheduler.decide.plan import Bind
from scheduler.model import Gang, PodRef
from scheduler.placement.types import Assignment, Placement
from scheduler.run.inflight import ApplyResult
from scheduler.run.latency import CompleteSince, SchedulingLatency
from scheduler.run.metrics import SchedulerMetrics
from tests.unit.policies import builders as b

WHOLE = b.gang("g", "team", pods=2)
SHORT = b.gang("g", "team", pods=2, present=1)  # one of its two members yet to come
OTHER = b.gang("h", "team")


@dataclass
class Case:
    name: str
    #: Each cycle: its time and its pending gangs.
    cycles: list[tuple[float, tuple[Gang, ...]]]
    since: dict[str, float]


CASES = [
    Case("from the first cycle that saw it complete", [(1.0, (WHOLE,)), (2.0, (WHOLE,))],
         {"ns/g": 1.0}),
    Case("not while members are missing", [(1.0, (SHORT,)), (2.0, (WHOLE,)), (3.0, (WHOLE,))],
         {"ns/g": 2.0}),
    Case("a gang complete again after a member went starts over",
         [(1.0, (WHOLE,)), (2.0, (SHORT,)), (3.0, (WHOLE,))], {"ns/g": 3.0}),
    Case("a gang no longer pending starts over", [(1.0, (WHOLE, OTHER)), (2.0, (OTHER,)),
                                                  (3.0, (WHOLE, OTHER))],
         {"ns/g": 3.0, "ns/h": 1.0}),
    Case("an equal gang object of a later cycle is the same gang",
         [(1.0, (WHOLE,)), (2.0, (b.gang("g", "team", pods=2),))], {"ns/g": 1.0}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_complete_since(case: Case) -> None:
    complete = CompleteSince()
    for now, pending in case.cycles:
        complete.track(pending, now)
    assert complete.since == case.since


def test_the_same_pending_tuple_again_changes_nothing() -> None:
    complete, pending = CompleteSince(), (WHOLE,)
    complete.track(pending, 1.0)
    complete.take(["ns/g"])  # its binds went out
    complete.track(pending, 2.0)
    assert complete.since == {}  # the same tuple: the cache's gangs did not change
    complete.track((WHOLE,), 3.0)
    assert complete.since == {"ns/g": 3.0}


def test_take_hands_over_the_start_and_restore_keeps_the_first() -> None:
    complete = CompleteSince()
    complete.track((WHOLE, OTHER), 1.0)
    assert complete.take(["ns/g", "ns/unknown"]) == {"ns/g": 1.0}
    assert complete.since == {"ns/h": 1.0}
    # Its bind failed (taken in at the start of the next cycle): it has waited since 1.0,
    # and the cycle that sees it pending again keeps that.
    complete.restore("ns/g", 1.0)
    complete.track((WHOLE, OTHER), 5.0)
    assert complete.since == {"ns/g": 1.0, "ns/h": 1.0}
    complete.restore("ns/h", 3.0)  # a gang still waiting keeps its own start
    assert complete.since["ns/h"] == 1.0


#: Gang objects a cycle may hold: complete and short versions of one gang id, equal copies.
POOL = (WHOLE, SHORT, b.gang("g", "team", pods=2), OTHER, b.gang("h", "team"),
        b.gang("k", "team", pods=3, present=2), b.gang("k", "team", pods=3))


def _step() -> st.SearchStrategy[tuple[str, Any]]:
    """One thing the loop does between or in cycles."""
    pending = st.lists(st.sampled_from(range(len(POOL))), max_size=4).map(
        lambda ix: tuple({POOL[i].id: POOL[i] for i in ix}.values()))  # each gang id once
    return st.one_of(st.tuples(st.just("track"), pending),
                     st.tuples(st.just("again"), st.none()),  # the same tuple as last cycle
                     st.tuples(st.just("take"), st.lists(st.sampled_from(
                         ["ns/g", "ns/h", "ns/k", "ns/x"]), max_size=2)),
                     st.tuples(st.just("restore"), st.tuples(
                         st.sampled_from(["ns/g", "ns/h", "ns/k"]),
                         st.floats(0, 50, allow_nan=False))))


@given(st.lists(_step(), max_size=12))
def test_kept_incrementally_equals_worked_out_afresh(steps: list[tuple[str, Any]]) -> None:
    """``track`` looks only at what changed; a reference works ``since`` out from every
    pending gang whenever the tuple is a new one (the rule before it was incremental)."""
    complete, since = CompleteSince(), dict[str, float]()
    last: tuple[Gang, ...] | None = None
    for now, (kind, arg) in enumerate(steps, start=1):
        if kind in ("track", "again"):
            pending = last if kind == "again" and last is not None else tuple(arg or ())
            if pending is not last:
                since = {g.id: since.get(g.id, float(now)) for g in pending if g.is_complete}
            complete.track(pending, float(now))
            last = pending
        elif kind == "take":
            assert complete.take(list(arg)) == {gid: since.pop(gid) for gid in arg
                                                if gid in since}
        else:
            gid, t = arg
            complete.restore(gid, t)
            since.setdefault(gid, t)
        assert complete.since == since


BIND = Bind("ns/g", "team", Placement("ns/g", (Assignment("worker", "n1", 2),)),
            pod_nodes=((PodRef("ns", "g-0", "u0"), "n1"), (PodRef("ns", "g-1", "u1"), "n1")))


@dataclass
class Landing:
    name: str
    result: ApplyResult
    since: dict[str, float]
    observed: float | None  # the latency observed (None: nothing)
    restored: dict[str, float]


LANDINGS = [
    Landing("bound: from complete to landed", ApplyResult(bound=("ns/g",)), {"ns/g": 10.0},
            7.5, {}),
    Landing("bound, never seen complete: 0", ApplyResult(bound=("ns/g",)), {}, 0.0, {}),
    Landing("bound before it was seen complete (clocks): never negative",
            ApplyResult(bound=("ns/g",)), {"ns/g": 20.0}, 0.0, {}),
    Landing("failed: pending again, its latency runs on", ApplyResult(failed={"ns/g": "x"}),
            {"ns/g": 10.0}, None, {"ns/g": 10.0}),
    Landing("another gang's outcome: nothing", ApplyResult(bound=("ns/x",)), {"ns/g": 10.0},
            None, {}),
]


@pytest.mark.parametrize("case", LANDINGS, ids=lambda c: c.name)
def test_landed(case: Landing) -> None:
    metrics = SchedulerMetrics()
    latency = SchedulingLatency(metrics)
    with capture_logs() as logs:
        latency.landed(BIND, case.result, case.since, 17.5)
    count = metrics.registry.get_sample_value(
        "gang_scheduler_gang_scheduling_latency_seconds_count", {"queue": "team"})
    total = metrics.registry.get_sample_value(
        "gang_scheduler_gang_scheduling_latency_seconds_sum", {"queue": "team"})
    bound = [e for e in logs if e["event"] == "gang_bound"]
    if case.observed is None:
        assert not count and not bound
    else:
        assert (count, total) == (1.0, case.observed)
        assert [(e["gang"], e["queue"], e["pods"], e["nodes"], e["latency_s"]) for e in bound] \
            == [("ns/g", "team", 2, 1, case.observed)]
    assert latency.complete.since == case.restored


def test_without_metrics_a_bound_gang_is_still_logged() -> None:
    with capture_logs() as logs:
        SchedulingLatency(None).landed(BIND, ApplyResult(bound=("ns/g",)), {"ns/g": 10.0}, 12.0)
    assert [e["latency_s"] for e in logs if e["event"] == "gang_bound"] == [2.0]
