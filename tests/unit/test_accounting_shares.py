"""Accounting in GPU-equivalents (issue 36): members holding a share of a GPU's memory are
charged GPU-hours for the share, while quota still charges them a whole GPU each; the
queues view shows both."""

from __future__ import annotations

from scheduler.decide.plan import CyclePlan
from scheduler.decide.tallies import queue_tallies
from scheduler.model import Gang, PodRequirements, Resources, Role, RunningGang
from scheduler.model.demand import gpus_of
from scheduler.report.accounting import account
from scheduler.report.queue_report import queue_reports
from scheduler.views.state import QueuePool
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import policies, queue
from tests.unit.test_loop_metrics import node


def _running(device_milli: int | None, members: int = 2) -> RunningGang:
    role = Role("w", members, PodRequirements(Resources.of(cpu=1000)), device_gpus=1,
                device_milli=device_milli)
    gang = Gang(id="ns/g", uid="u", namespace="ns", name="g", queue="team", roles=(role,))
    return RunningGang(gang, (("n1", Resources.of(cpu=1000 * members)),), 0.0,
                       members=(("w", "n1", members),))


def test_two_half_gpu_shares_are_charged_one_gpu_and_quota_two() -> None:
    rg = _running(500)
    acc = account(Snapshot((node("n1"),), (rg,)), CyclePlan(now=0.0), (), None,
                  with_pools=False)
    assert acc.allocated == {("team", "ns", "p"): 1.0}
    assert rg.held_milli == {"n1": 1000}
    assert [gpus_of(res) for _, res in rg.charges] == [2]  # quota: a whole GPU a share


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


def test_the_queues_view_shows_the_half_gpus_held_beside_the_whole_gpus_charged() -> None:
    row = _queue_row(_running(500, members=3))
    assert (row.allocated, row.held_milli) == (3, 1500)
    assert row.allocated_text() == "3 (1.5 held)"


def test_the_queues_view_is_unchanged_without_shares() -> None:
    row = _queue_row(_running(None, members=3))
    assert (row.allocated, row.held_milli, row.allocated_text()) == (3, None, "3")
