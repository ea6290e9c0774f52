"""Accounting in GPU-equivalents (issue 36): members holding a share of a GPU's memory are
charged GPU-hours for the share, and quota the shares on a node rounded up to whole GPUs;
the queues view shows what is held where it is less than what quota charges."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan
from scheduler.decide.tallies import queue_tallies
from scheduler.model import Gang, PodRequirements, Resources, Role, RunningGang
from scheduler.model.demand import MILLI, gpus_of
from scheduler.report.accounting import account
from scheduler.report.queue_report import queue_reports
from scheduler.views.state import QueuePool
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, nodes, policies, queue
from tests.unit.test_loop_metrics import node


def _running(device_milli: int | None, members: int = 2) -> RunningGang:
    role = Role("w", members, PodRequirements(Resources.of(cpu=1000)), device_gpus=1,
                device_milli=device_milli)
    gang = Gang(id="ns/g", uid="u", namespace="ns", name="g", queue="team", roles=(role,))
    return RunningGang(gang, (("n1", Resources.of(cpu=1000 * members)),), 0.0,
                       members=(("w", "n1", members),))


def test_two_half_gpu_shares_are_charged_one_gpu_in_accounting_and_quota() -> None:
    rg = _running(500)
    acc = account(Snapshot((node("n1"),), (rg,)), CyclePlan(now=0.0), (), None,
                  with_pools=False)
    assert acc.allocated == {("team", "ns", "p"): 1.0}
    assert rg.held_milli == {"n1": 1000}
    assert [gpus_of(res) for _, res in rg.charges] == [1]


def test_a_share_not_yet_allocated_is_charged_whole() -> None:
    rg = _running(None, members=3)
    acc = account(Snapshot((node("n1"),), (rg,)), CyclePlan(now=0.0), (), None,
                  with_pools=False)
    assert acc.allocated == {("team", "ns", "p"): 3}
    assert rg.held_milli == {}


def _queue_row(rg: RunningGang) -> QueuePool:
    pols = policies(queue("team", quota={"p": 8}))
    tallies = queue_tallies(Snapshot((node("n1"),), (rg,)), (), pols, CyclePlan(now=0.0))
    (report,) = queue_reports(tallies, pols)
    (pool,) = report.pools
    return QueuePool(pool.pool, gpus_of(pool.nominal), gpus_of(pool.allocated), 0, 0,
                     pool.held_milli)


def test_the_queues_view_shows_the_half_gpus_held_beside_the_gpus_quota_charges() -> None:
    row = _queue_row(_running(500, members=3))
    assert (row.allocated, row.held_milli) == (2, 1500)  # quota: 1.5 rounded up
    assert row.allocated_text() == "2 (1.5 held)"


def test_the_queues_view_is_unchanged_without_shares() -> None:
    row = _queue_row(_running(None, members=3))
    assert (row.allocated, row.held_milli, row.allocated_text()) == (3, None, "3")


def test_a_share_not_allocated_yet_is_charged_whole_by_quota() -> None:
    rg = _running(None, members=3)
    assert [gpus_of(res) for _, res in rg.charges] == [3]


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=12))
def test_quota_never_charges_less_than_the_shares_held(shares: list[int]) -> None:
    roles = tuple(Role(f"w{i}", 1, PodRequirements(Resources.of(cpu=1000 + i)), device_gpus=1,
                       device_milli=None if m == 1000 else m) for i, m in enumerate(shares))
    gang = Gang(id="ns/g", uid="u", namespace="ns", name="g", queue="team", roles=roles)
    rg = RunningGang(gang, (("n1", Resources.of(cpu=1000 * len(shares))),), 0.0,
                     members=tuple((r.name, "n1", 1) for r in roles))
    (charged,) = (gpus_of(res) for _, res in rg.charges)
    assert charged * 1000 >= sum(shares) > (charged - 1) * 1000  # rounded up, never below
    assert charged <= len(shares)  # never more than a whole GPU a share


A100 = nodes("a100", 2)  # two nodes of 8 GPUs


def _share_gang(shares: list[int], node_name: str) -> RunningGang:
    """A running gang of one member a share (thousandths; 1000: a whole GPU) on *node_name*."""
    roles = tuple(Role(f"w{i}", 1, PodRequirements(Resources.of(cpu=1000 + i)), device_gpus=1,
                       device_milli=None if m == MILLI else m) for i, m in enumerate(shares))
    gang = Gang(id="ns/shares", uid="u-shares", namespace="ns", name="shares", queue="a",
                roles=roles)
    return RunningGang(gang, ((node_name, Resources.of(cpu=1000 * len(shares))),), 0.0,
                       members=tuple((r.name, node_name, 1) for r in roles))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, MILLI), min_size=1, max_size=8), st.integers(1, 8),
       st.integers(0, 12))
def test_a_gang_is_admitted_beside_shares_exactly_when_quota_holds_both(
        shares: list[int], gpus: int, quota: int) -> None:
    # Never over quota: the shares are charged their GPU-equivalents rounded up, never less.
    running = _share_gang(shares, "a100-0000")
    pending = Gang(id="ns/next", uid="u-next", namespace="ns", name="next", queue="a",
                   roles=(Role("w", 1, PodRequirements(Resources.of(gpu=gpus, cpu=1000))),))
    pol = policies(queue("a", quota={"a100": quota}))
    plan = decide(Snapshot(A100, (running,)), [pending], pol, 0.0, solver=SOLVE)
    held = -(-sum(shares) // MILLI)
    assert (plan.bind_of(pending.id) is not None) == (held + gpus <= quota)
