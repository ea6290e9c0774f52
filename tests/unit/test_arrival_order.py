"""Gangs of the same age go in the order the scheduler saw them (``Gang.arrival``).

The apiserver keeps creation times to the second, so two Jobs a script submits one after the
other usually have the same; their uids are random. Ordered by uid, the later one went first
half the time (the e2e test of two DRA Jobs caught it). The watch delivers objects in the
order they were written, so the order the cache first saw each gang in is the order they
were submitted.
"""

from __future__ import annotations

import pytest

from tests.unit.devices.world import World


@pytest.mark.parametrize("submitted", [("zeta", "alpha"), ("alpha", "zeta")])
def test_of_two_jobs_of_the_same_second_the_first_submitted_goes_first(
        submitted: tuple[str, str]) -> None:
    world = World(nodes=2, devices=3, gpus=3)  # room for one Job of 4 at a time
    for name in submitted:
        world.job(name, 4)
    pending = world.cache.cycle_input(0.0).gangs.pending
    assert len({g.creation_time for g in pending}) == 1
    plan = world.decide()
    assert [b.gang_id for b in plan.binds] == [f"team/{submitted[0]}"]
    assert list(plan.pending) == [f"team/{submitted[1]}"]


def test_arrivals_count_up_in_the_order_the_cache_saw_the_gangs() -> None:
    world = World(nodes=2, devices=3, gpus=3)
    world.job("alpha", 4)
    world.job("zeta", 4)
    arrival = {g.name: g.arrival for g in world.cache.cycle_input(0.0).gangs.pending}
    assert 0 < arrival["alpha"] < arrival["zeta"]
