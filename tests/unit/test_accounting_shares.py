"""Accounting in GPU-equivalents (issue 36): members holding a share of a GPU's memory are
charged GPU-hours for the share, while quota still charges them a whole GPU each."""

from __future__ import annotations

from scheduler.decide.plan import CyclePlan
from scheduler.model import Gang, PodRequirements, Resources, Role, RunningGang
from scheduler.model.demand import gpus_of
from scheduler.report.accounting import account, running_milli
from scheduler.world.snapshot import Snapshot
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
    assert running_milli(rg) == {"n1": 1000}
    assert [gpus_of(res) for _, res in rg.charges] == [2]  # quota: a whole GPU a share


def test_a_share_not_yet_allocated_is_charged_whole() -> None:
    rg = _running(None, members=3)
    acc = account(Snapshot((node("n1"),), (rg,)), CyclePlan(now=0.0), (), None,
                  with_pools=False)
    assert acc.allocated == {("team", "ns", "p"): 3}
    assert running_milli(rg) == {}
