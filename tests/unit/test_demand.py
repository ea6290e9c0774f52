"""A role's demand is its GPU request while no device claim adds to it; a gang's demand is the
sum of its roles' demands times their required members: what ``min_requests`` says of GPUs."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.model import Gang, PodRequirements, Resources, Role
from scheduler.model.demand import NO_DEMAND, Demand, gang_demand, gpus_of, role_demand, total
from scheduler.model.resources import GPU


def _gang(*roles: tuple[int, int, int | None]) -> Gang:
    """Roles of (gpus per pod, count, min_count)."""
    return Gang(id="ns/g", uid="u", namespace="ns", name="g", queue="q",
                roles=tuple(Role(f"r{i}", count,
                                 PodRequirements(Resources({GPU: gpus, "cpu": 500})), minimum)
                            for i, (gpus, count, minimum) in enumerate(roles)))


@dataclass(frozen=True)
class Case:
    name: str
    roles: tuple[tuple[int, int, int | None], ...]
    role_gpus: tuple[int, ...]
    gang_gpus: int


CASES = [
    Case("one worker", ((8, 1, None),), (8,), 8),
    Case("cpu launcher and gpu workers", ((0, 1, None), (8, 64, None)), (0, 8), 512),
    Case("elastic: only required members", ((4, 10, 2),), (4,), 8),
    Case("nothing required", ((8, 4, 0),), (8,), 0),
    Case("no gpus at all", ((0, 3, None),), (0,), 0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_demand_is_the_gpu_request_today(case: Case) -> None:
    g = _gang(*case.roles)
    assert tuple(r.demand.gpus for r in g.roles) == case.role_gpus
    assert tuple(role_demand(r) for r in g.roles) == tuple(Demand(n) for n in case.role_gpus)
    assert g.demand == gang_demand(g) == Demand(case.gang_gpus)
    assert g.gpus == case.gang_gpus
    assert all(r.demand.device_claims == () for r in g.roles)


@pytest.mark.parametrize(("vector", "gpus"), [
    (Resources(), 0), (Resources({GPU: 3}), 3), (Resources({"cpu": 1000}), 0),
    ({GPU: 2, "cpu": 1}, 2), ({}, 0),
])
def test_gpus_of_reads_the_gpu_key(vector: dict[str, int] | Resources, gpus: int) -> None:
    assert gpus_of(vector) == gpus


def test_addition_and_total() -> None:
    a, b = Demand(2, ("ns/c1",)), Demand(3)
    assert a + b == Demand(5, ("ns/c1",))
    assert total([a, b, NO_DEMAND]) == a + b + NO_DEMAND
    assert total([]) == NO_DEMAND
    assert Demand(4, ("t",)).times(3) == Demand(12, ("t",))


_ROLE = st.tuples(st.integers(0, 16), st.integers(1, 64), st.none() | st.integers(0, 64))


@given(st.lists(_ROLE, min_size=1, max_size=5))
def test_gang_demand_is_the_sum_of_role_demands_and_the_old_gpu_request(
        roles: list[tuple[int, int, int | None]]) -> None:
    roles = [(g, c, None if m is None else min(m, c)) for g, c, m in roles]
    gang = _gang(*roles)
    by_roles = sum(r.demand.gpus * r.required for r in gang.roles)
    assert gang.demand.gpus == by_roles
    assert gang.demand == total(r.demand.times(r.required) for r in gang.roles)
    assert gang.demand.gpus == gang.min_requests.get(GPU, 0)  # the old GPU-request sum
