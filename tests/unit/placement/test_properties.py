"""Properties of ``solve`` on small random clusters, checked against a brute-force search.

The brute force enumerates every way to put each role's required pods on its eligible
nodes (at most 6 nodes, 2 roles, 3 pods per role), so it is the ground truth for
"a placement exists" — with the snapshot's free resources, or with an empty cluster to
check that ``NEVER_FITS`` / ``NO_ELIGIBLE_NODES`` are only said when preemption cannot help.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.model import Gang, Node, RunningGang, Taint, Toleration, TopologyMode
from scheduler.model.resources import Resources
from scheduler.placement import (
    Placement,
    PlacementParams,
    Unplaceable,
    UnplaceableReason,
    solve,
)
from scheduler.world.snapshot import Snapshot
from tests.unit.placement.builders import BLOCK, HOST, RACK, gang, node, role

SETTINGS = settings(max_examples=250, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Instance:
    nodes: tuple[Node, ...]
    running: tuple[RunningGang, ...]
    other: dict[str, Resources]
    gang: Gang
    params: PlacementParams

    def snapshot(self, empty: bool = False) -> Snapshot:
        if empty:
            return Snapshot(self.nodes)
        return Snapshot(self.nodes, self.running, self.other)


@st.composite
def instances(draw: st.DrawFn) -> Instance:
    n = draw(st.integers(1, 6))
    nodes, usage = [], {}
    for i in range(n):
        gpus = draw(st.sampled_from((0, 2, 4, 8)))
        cpu = draw(st.sampled_from((2, 4, 8)))
        taint = draw(st.sampled_from((None, Taint("dedicated", "x"))))
        nodes.append(node(
            f"n{i}", gpu=gpus, cpu=cpu, pods=draw(st.sampled_from((2, 110))),
            rack=draw(st.sampled_from((None, "r0", "r1", "r2"))),
            block=draw(st.sampled_from(("b0", "b1"))),
            labels={"gpu": draw(st.sampled_from(("a100", "h100")))},
            taints=(taint,) if taint else (),
            unschedulable=draw(st.booleans()) and draw(st.booleans()),
            ready=not (draw(st.booleans()) and draw(st.booleans()))))
        usage[f"n{i}"] = Resources({"nvidia.com/gpu": draw(st.integers(0, gpus)),
                                    "cpu": 1000 * draw(st.integers(0, cpu)),
                                    "pods": draw(st.integers(0, 1))})
    split = draw(st.integers(0, n))
    running = (RunningGang(gang(role("x", 1), name="running"),
                           tuple((f"n{i}", usage[f"n{i}"]) for i in range(split)), 0.0),)
    other = {f"n{i}": usage[f"n{i}"] for i in range(split, n)}
    roles = []
    for r in range(draw(st.integers(1, 2))):
        count = draw(st.integers(1, 3))
        roles.append(role(
            f"role{r}", count, gpu=draw(st.sampled_from((0, 1, 2, 4))),
            cpu_m=draw(st.sampled_from((500, 1000, 2000, 4000))), mem_gi=0,
            min_count=draw(st.one_of(st.none(), st.integers(0, count))),
            selector=draw(st.sampled_from((None, {"gpu": "a100"}))),
            tolerations=draw(st.sampled_from(((), (Toleration("dedicated", "Exists"),))))))
    topo = draw(st.sampled_from((None, RACK, BLOCK, HOST)))
    mode = draw(st.sampled_from(tuple(TopologyMode)))
    excluded = frozenset(draw(st.sets(st.sampled_from([f"n{i}" for i in range(n)]),
                                      max_size=1)))
    return Instance(tuple(nodes), running, other, gang(*roles, level=topo, mode=mode),
                    PlacementParams(excluded_nodes=excluded))


def _allowed(inst: Instance, snap: Snapshot, role_name: str) -> list[str]:
    req = inst.gang.role(role_name).requirements
    return [n for n in snap.node_names
            if req.allows(snap.nodes[n]) and n not in inst.params.excluded_nodes]


def _splits(total: int, bins: int) -> Iterator[tuple[int, ...]]:
    for cut in itertools.combinations(range(total + bins - 1), bins - 1):
        edges = (-1, *cut, total + bins - 1)
        yield tuple(edges[i + 1] - edges[i] - 1 for i in range(bins))


def brute_force(inst: Instance, snap: Snapshot) -> bool:
    """Does any placement of the required members exist on *snap*?"""
    roles = [r for r in inst.gang.roles if r.required]
    choices = []
    for r in roles:
        nodes = _allowed(inst, snap, r.name)
        if not nodes:
            return False
        choices.append([dict(zip(nodes, s, strict=True)) for s in _splits(r.required, len(nodes))])
    constraint = inst.gang.topology
    for combo in itertools.product(*choices):
        used: dict[str, Resources] = {}
        for r, counts in zip(roles, combo, strict=True):
            for n, c in counts.items():
                if c:
                    used[n] = used.get(n, Resources()) + r.requests * c
        if not all(u.fits_in(snap.free(n)) for n, u in used.items()):
            continue
        if (constraint is not None and constraint.mode is TopologyMode.REQUIRED
                and len({snap.topology.domain_of(n, constraint.level) for n in used}) > 1):
            continue
        return True
    return not roles


def check_valid(inst: Instance, snap: Snapshot, result: Placement) -> None:
    per_node: dict[str, Resources] = {}
    per_role: dict[str, int] = {}
    assert all(a.count > 0 for a in result.assignments)
    assert list(result.assignments) == sorted(result.assignments, key=lambda a: (a.role, a.node))
    for a in result.assignments:
        r = inst.gang.role(a.role)
        assert a.node in _allowed(inst, snap, a.role), (a, "not allowed")
        per_node[a.node] = per_node.get(a.node, Resources()) + r.requests * a.count
        per_role[a.role] = per_role.get(a.role, 0) + a.count
    for n, use in per_node.items():
        assert use.fits_in(snap.free(n)), (n, use, snap.free(n))
    for r in inst.gang.roles:
        assert r.required <= per_role.get(r.name, 0) <= r.count
    constraint = inst.gang.topology
    if constraint is not None:
        domains = {snap.topology.domain_of(n, constraint.level) for n in per_node}
        assert result.domains_used == len(domains)
        if constraint.mode is TopologyMode.REQUIRED:
            assert len(domains) <= 1


@SETTINGS
@given(instances())
def test_placements_respect_every_constraint_and_are_all_or_nothing(inst: Instance) -> None:
    snap = inst.snapshot()
    result = solve(inst.gang, snap, inst.params)
    if isinstance(result, Placement):
        check_valid(inst, snap, result)
    else:
        assert isinstance(result, Unplaceable)
        assert result.message


@SETTINGS
@given(instances())
def test_complete_whenever_brute_force_finds_a_placement(inst: Instance) -> None:
    snap = inst.snapshot()
    result = solve(inst.gang, snap, inst.params)
    assert isinstance(result, Placement) == brute_force(inst, snap), result


@SETTINGS
@given(instances())
def test_never_fits_and_no_eligible_nodes_still_apply_on_an_empty_cluster(inst: Instance) -> None:
    result = solve(inst.gang, inst.snapshot(), inst.params)
    if isinstance(result, Unplaceable) and result.reason in (
            UnplaceableReason.NEVER_FITS, UnplaceableReason.NO_ELIGIBLE_NODES):
        assert not result.preemption_may_help
        assert not brute_force(inst, inst.snapshot(empty=True)), result.message


@SETTINGS
@given(instances(), st.integers(0, 3))
def test_deterministic_whatever_the_cache_state(inst: Instance, detours: int) -> None:
    first = solve(inst.gang, inst.snapshot(), inst.params)
    snap = inst.snapshot()
    probe = gang(role("probe", 1, gpu=1, mem_gi=0), name="probe")
    s = snap
    for _ in range(detours):  # move the shared free-GPU index to other snapshots first
        placed = solve(probe, s)
        if isinstance(placed, Placement):
            s = s.with_running(placed.as_running(probe, 0.0))
    assert solve(inst.gang, snap, inst.params) == first
    assert solve(inst.gang, snap, inst.params) == first
