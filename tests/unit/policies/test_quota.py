"""Hierarchical quota: lending, borrowing, limits, coverage; fair share from it."""

from __future__ import annotations

from policies import fairshare
from policies.queues import OrderingMode, QueueSet
from policies.quota import QuotaLedger, QuotaTree
from scheduler.model.resources import GPU
from tests.unit.policies.builders import gang, queue


def ledger(*queues: object) -> QuotaLedger:
    return QuotaLedger.empty(QuotaTree.build(QueueSet.of(queues)))  # type: ignore[arg-type]


def gpus(led: QuotaLedger, name: str, pool: str = "a100") -> int:
    return led.available(name, pool)[GPU]


def use(led: QuotaLedger, name: str, n: int, pool: str = "a100") -> QuotaLedger:
    return led.charge(name, pool, {GPU: n})


def test_siblings_lend_idle_quota_and_get_it_back() -> None:
    led = ledger(queue("p"), queue("a", "p", quota={"a100": 10}),
                 queue("b", "p", quota={"a100": 10}))
    assert gpus(led, "a") == 20
    led = use(led, "a", 15)
    assert gpus(led, "a") == 5 and gpus(led, "b") == 5
    assert led.borrowing("a", "a100") and not led.borrowing("b", "a100")
    led = use(led, "a", -15)  # a's gangs finish
    assert gpus(led, "b") == 20


def test_root_queue_cannot_borrow() -> None:
    led = ledger(queue("solo", quota={"a100": 8}), queue("other", quota={"a100": 8}))
    assert gpus(led, "solo") == 8
    assert gpus(use(led, "other", 8), "solo") == 8


def test_borrowing_limit() -> None:
    led = ledger(queue("p"), queue("a", "p", quota={"a100": 10}, borrow={"a100": 3}),
                 queue("b", "p", quota={"a100": 10}))
    assert gpus(led, "a") == 13
    assert gpus(use(led, "a", 12), "a") == 1


def test_lending_limit_keeps_a_guarantee() -> None:
    led = ledger(queue("p"), queue("a", "p", quota={"a100": 10}),
                 queue("b", "p", quota={"a100": 10}, lend={"a100": 4}))
    assert gpus(led, "a") == 14
    led = use(led, "a", 14)
    assert gpus(led, "b") == 6  # the 6 b does not lend stay b's


def test_parent_with_its_own_quota_and_nested_levels() -> None:
    led = ledger(queue("org", quota={"a100": 8}),
                 queue("research", "org"), queue("prod", "org", quota={"a100": 8}),
                 queue("a", "research", quota={"a100": 4}), queue("b", "research"))
    assert gpus(led, "b") == 20  # everything is lendable down the tree
    led = use(led, "prod", 8)
    assert gpus(led, "a") == 12 and gpus(led, "b") == 12
    led = use(led, "b", 10)
    assert gpus(led, "a") == 2


def test_only_covered_resources_are_limited_and_uncovered_pools_are_closed() -> None:
    led = ledger(queue("solo", quota={"a100": 8}))
    assert led.shortfall("solo", "a100", {GPU: 8, "cpu": 10**9}) == {}
    assert led.shortfall("solo", "a100", {GPU: 9}) == {GPU: 1}
    assert led.tree.pools_of("solo") == ("a100",)


def test_weighted_fair_share_of_what_is_borrowed() -> None:
    led = ledger(queue("p", quota={"a100": 40}), queue("a", "p", weight=1, quota={"a100": 0}),
                 queue("b", "p", weight=3, quota={"a100": 0}))
    led = use(use(led, "a", 10), "b", 30)
    assert fairshare.dominant_share(led, "a") == fairshare.dominant_share(led, "b") == 0.25
    more = use(led, "b", 1)
    assert fairshare.queue_key(more, "a") < fairshare.queue_key(more, "b")
    # Ranked with half the next gang added: a big next gang weighs against its queue.
    assert fairshare.queue_key(led, "a", {"a100": {GPU: 8}}) > fairshare.queue_key(
        led, "b", {"a100": {GPU: 8}})


def test_within_nominal_share_is_zero() -> None:
    led = ledger(queue("p"), queue("a", "p", quota={"a100": 10}),
                 queue("b", "p", quota={"a100": 10}))
    assert fairshare.dominant_share(use(led, "a", 10), "a") == 0.0
    assert fairshare.dominant_share(use(led, "a", 15), "a") == 0.25


def test_gang_key_orders_priority_then_age_then_uid() -> None:
    old, young, vip = gang("old", created=1.0), gang("young", created=2.0), gang("vip", priority=9)
    key = lambda g: fairshare.gang_key(g, OrderingMode.FAIR_SHARE)  # noqa: E731
    assert sorted([young, old, vip], key=key) == [vip, old, young]
    fifo = lambda g: fairshare.gang_key(g, OrderingMode.FIFO)  # noqa: E731
    assert sorted([young, old, vip], key=fifo)[0] == vip  # created at 0.0: arrival order only


def test_a_quota_in_a_pool_no_node_carries_takes_nothing_from_its_siblings() -> None:
    """Issue 16: a live Queue whose quota names a pool that does not exist (``a10`` for
    ``a100``) took fair share from its siblings. Its quota lends nothing into the pools that
    exist and weighs in no sibling's share: what the siblings may take and their ranks are
    those of the same tree without it (the Queue gets ``QuotaFitsCluster=False``)."""
    siblings = (queue("p"), queue("a", "p", quota={"a100": 10}),
                queue("b", "p", quota={"a100": 10}))
    typo = queue("t", "p", quota={"a10": 100})
    for n in (0, 10, 15, 20):
        with_typo, without = use(ledger(*siblings, typo), "a", n), use(ledger(*siblings), "a", n)
        for name in ("a", "b"):
            assert gpus(with_typo, name) == gpus(without, name), (n, name)
            assert fairshare.dominant_share(with_typo, name) == fairshare.dominant_share(
                without, name), (n, name)
            assert fairshare.queue_key(with_typo, name) == fairshare.queue_key(without, name)
