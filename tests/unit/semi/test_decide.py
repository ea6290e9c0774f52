"""Semi-preemptible queues in ``decide``: reclaim by the lender ``b`` takes only what runs
above queue ``a``'s quota; each of ``a``'s gangs' minimum, earliest started first while it
fits within the quota, is kept. Preemption within ``a`` and queues without the field decide
as before. (``NOW`` is 10,000 s; the cost of a victim is its GPU-seconds since it started.)
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from policies.queues import PolicySet
from scheduler.kube.write.actuator import scheduled_message
from scheduler.model.workloads import PodInfo
from tests.unit.semi.helpers import N0, N1, N2, N3, job, plan_of, tree


@dataclass(frozen=True)
class Case:
    name: str
    pods: list[PodInfo]
    parallelism: dict[str, int]
    policies: PolicySet
    #: victim gang -> the pods its eviction takes (None: the whole gang).
    evicted: dict[str, set[str] | None]


# ``s`` (8 GPUs, started late: cheap to lose) fits within a's 8 GPUs; ``big`` (24, started
# earlier) does not fit beside it, so a borrows 24 from b.
_CHEAP_WITHIN_QUOTA = [*job("s", [N0], at=9900), *job("big", [N1, N2, N3], at=9000)]
_ELASTIC = job("e", [N0, N1, N2, N3], min_member=2)

CASES = [
    Case("the gang within the quota is kept though another costs more to lose",
         [*_CHEAP_WITHIN_QUOTA, *job("x", [None], queue="b")], {"s": 1, "big": 3, "x": 1},
         tree(8, 24), {"ns/big": None}),
    Case("without the field the cheapest gang goes, within the quota or not",
         [*_CHEAP_WITHIN_QUOTA, *job("x", [None], queue="b")], {"s": 1, "big": 3, "x": 1},
         tree(8, 24, on=False), {"ns/s": None}),
    Case("a shielded gang gives back its members above the minimum, highest rank first",
         [*_ELASTIC, *job("x", [None], queue="b")], {"e": 4, "x": 1},
         tree(16, 16), {"ns/e": {"e-3"}}),
    Case("without the field the same members go when they suffice (the victim search "
         "prefers them to whole gangs): the field only adds its words to the event",
         [*_ELASTIC, *job("x", [None, None], queue="b")], {"e": 4, "x": 2},
         tree(16, 16, on=False), {"ns/e": {"e-2", "e-3"}}),
    Case("never more than runs above the minimum: x waits for the shielded minimum",
         [*_ELASTIC, *job("x", [None, None, None], queue="b")], {"e": 4, "x": 3},
         tree(16, 24), {}),
    Case("without the field the gang goes whole when its members above the minimum do not "
         "suffice",
         [*_ELASTIC, *job("x", [None, None, None], queue="b")], {"e": 4, "x": 3},
         tree(16, 24, on=False), {"ns/e": None}),
    Case("an elastic gang whose minimum does not fit the quota goes whole if need be",
         [*job("e", [N0, N1, N2, N3], min_member=2),
          *job("x", [None, None, None], queue="b")], {"e": 4, "x": 3},
         tree(8, 24), {"ns/e": None}),
    Case("the earliest started gang holds the quota: the later one goes",
         [*job("old", [N0, N1], at=100), *job("new", [N2, N3], at=200),
          *job("x", [None], queue="b")], {"old": 2, "new": 2, "x": 1},
         tree(16, 16), {"ns/new": None}),
    Case("within the queue, priority preempts the cheapest gang as before",
         [*_CHEAP_WITHIN_QUOTA, *job("x", [None], priority=9)], {"s": 1, "big": 3, "x": 1},
         tree(8, 24), {"ns/s": None}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_reclaim_from_a_semi_preemptible_queue(case: Case) -> None:
    plan = plan_of(case.pods, case.parallelism, case.policies)
    got = {e.victim: None if e.release.is_whole else {p.name for p in e.pods}
           for e in plan.evictions}
    assert got == case.evicted


def test_the_eviction_names_the_policy_and_what_is_kept() -> None:
    plan = plan_of([*_ELASTIC, *job("x", [None, None], queue="b")], {"e": 4, "x": 2},
                   tree(16, 16))
    (ev,) = plan.evictions
    assert ev.headline == (
        "preempted by gang ns/x: members e-2, e-3 above the gang's minimum 2 are released for "
        "ns/x (priority 0): queue a is semi-preemptible (spec.preemption.semiPreemptible): "
        "these members run above its quota in pool a100, which queue b reclaims; the gang's "
        "minimum runs within the quota and is kept")


def test_without_the_field_the_eviction_does_not_name_it() -> None:
    plan = plan_of([*_ELASTIC, *job("x", [None, None], queue="b")], {"e": 4, "x": 2},
                   tree(16, 16, on=False))
    (ev,) = plan.evictions
    assert ev.headline.startswith(
        "preempted by gang ns/x: members e-2, e-3 above the gang's minimum 2 are released for "
        "ns/x (priority 0)"), ev.headline
    assert "semiPreemptible" not in ev.headline and "is kept" not in ev.headline


def test_a_waiting_reclaimer_is_told_the_minimum_is_kept() -> None:
    plan = plan_of([*_ELASTIC, *job("x", [None, None, None], queue="b")], {"e": 4, "x": 3},
                   tree(16, 24))
    assert not plan.evictions and not plan.nominations
    message = plan.pending["ns/x"].message
    assert "evicting" not in message
    assert message.endswith("; queue a is semi-preemptible (spec.preemption.semiPreemptible): "
                            "reclaim takes back only what runs above its quota, never a "
                            "gang's minimum within it")


def test_a_bind_says_which_members_run_above_the_quota() -> None:
    pods = job("e", [None] * 8, gpus=4, min_member=4)
    plan = plan_of(pods, {"e": 8}, tree(16, 16))
    (bind,) = plan.binds
    assert bind.growth == ("started with 4 of 4 optional members (minimum 4); members "
                           "e-4..e-7 run above a's quota and may be taken back "
                           "(spec.preemption.semiPreemptible)")
    # The Scheduled event says it too.
    assert scheduled_message(bind).endswith("; " + bind.growth)


def test_a_bind_within_the_quota_says_nothing_more() -> None:
    plan = plan_of(job("e", [None] * 4, gpus=4, min_member=2), {"e": 4}, tree(16, 16))
    (bind,) = plan.binds
    assert bind.growth == "started with 2 of 2 optional members (minimum 2)"
