"""A trace replayed with GPUs as DRA devices (issue 35, item 7): the placement code the live
scheduler runs allocates every member's claim, gangs start whole, no device is held by two
claims at once, devices come back when a gang ends so the queued ones start; and a trace of
whole-node jobs gives the same start times with devices as with ``nvidia.com/gpu``."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import structlog

from policies.queues import SchedulerPolicy
from scheduler.feed.cache import ClusterCache
from scheduler.model.devices import Allocation, DeviceId, DeviceResult
from scheduler.model.prebind import PreBind, PreBindKind
from scheduler.world import clusterspec
from simulator.claims import SimulatedClaims, template_for
from simulator.devices import cluster_devices
from simulator.engine import Simulation, SimulationResult
from simulator.policies import default_queues, make_preset
from simulator.session import claim_devices
from simulator.trace import TraceJob, TraceRole
from simulator.workload import job_objects, nodes_from_spec

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

H100 = "NVIDIA-H100-80GB-HBM3"


def job(job_id: str, t: float, pods: int, gpus: int, duration: float = 100.0,
        devices: bool = True, models: tuple[str, ...] = ()) -> TraceJob:
    return TraceJob(job_id, t, duration, "team",
                    (TraceRole("worker", pods, gpus, 1000, 1 << 30, models, devices),))


def replay(doc: dict[str, Any], jobs: list[TraceJob], policy: str = "gang-scheduler",
           watch: list[tuple[float, str, frozenset[DeviceId]]] | None = None,
           scheduler: SchedulerPolicy | None = None) -> SimulationResult:
    spec = clusterspec.parse(doc)
    nodes, devices = nodes_from_spec(spec), cluster_devices(spec)
    queues = default_queues((j.queue for j in jobs), nodes, devices.gpus)
    sim = Simulation(nodes, jobs, make_preset(policy, queues, scheduler), devices=devices)
    if watch is not None:
        _record(sim, watch)
    return sim.run()


def _record(sim: Simulation, into: list[tuple[float, str, frozenset[DeviceId]]]) -> None:
    """After every allocation, every claim's devices as the simulated cluster holds them."""
    claims: SimulatedClaims = sim.cluster.claims
    allocate = claims.allocate

    def spy(decisions: Any) -> None:
        allocate(decisions)
        for key, claim in claims.claims.items():
            if claim.allocation is not None:
                into.append((sim.clock.now, key, claim.allocation.devices))

    claims.allocate = spy  # type: ignore[method-assign]


MIXED = {"gpusAsDevices": True, "pools": [
    {"name": "h100", "count": 2, "gpusPerNode": 4, "gpuModel": H100},
    {"name": "a100", "count": 1, "gpusPerNode": 8, "gpuModel": "A100", "draDevices": False}]}


def test_device_gangs_start_whole_never_share_a_device_and_free_them_when_done() -> None:
    jobs = [job("a", 0, 2, 4), job("b", 0, 4, 2), job("c", 10, 1, 3, models=(H100,)),
            job("p", 0, 1, 8, devices=False), job("q", 5, 1, 8, devices=False)]
    seen: list[tuple[float, str, frozenset[DeviceId]]] = []
    res = replay(MIXED, jobs, watch=seen)
    out = {o.job_id: o for o in res.outcomes}
    assert {j: (o.start_time, o.end_time) for j, o in out.items()} == {
        "a": (0.0, 100.0),  # both H100 nodes, whole
        "b": (100.0, 200.0),  # waits whole for a's devices
        "c": (200.0, 300.0),  # then b's
        "p": (0.0, 100.0),  # plain GPUs of the a100 pool, beside the devices
        "q": (100.0, 200.0),
    }
    for s in res.samples:
        assert s.allocated_gpus == s.busy_gpus <= s.total_gpus == 16, s  # whole gangs only
    # At every allocation, no device is in two claims' allocations (the spy records every
    # claim after each call: a claim seen twice at one time is one claim).
    for t in sorted({t for t, _, _ in seen}):
        now = {key: ds for when, key, ds in seen if when == t}
        held = Counter(d for ds in now.values() for d in ds)
        assert held and max(held.values()) == 1, (t, held)
    assert len({k for _, k, _ in seen}) == 2 + 4 + 1  # one claim per pod of a, b, c


def test_claims_are_deleted_with_their_pods_and_devices_released() -> None:
    jobs = [job("a", 0, 2, 4), job("b", 0, 2, 4)]
    spec = clusterspec.parse(MIXED)
    nodes, devices = nodes_from_spec(spec), cluster_devices(spec)
    sim = Simulation(nodes, jobs, make_preset("fifo-gang", default_queues(
        ["team"], nodes, devices.gpus)), devices=devices)
    res = sim.run()
    assert [o.end_time for o in res.outcomes] == [100.0, 200.0]
    assert not sim.cluster.claims.claims and not sim.cluster.claims.held
    assert not sim.cache.facts.devices().claims


def test_quota_counts_the_devices() -> None:
    """A queue given 4 GPUs of quota runs one 4-device job at a time on 8 free devices: the
    claims count as GPUs (``Role.device_gpus``), a DRA gang is never free of quota."""
    jobs = [job(f"j{i}", 0, 1, 4) for i in range(3)]
    spec = clusterspec.parse({"gpusAsDevices": True, "pools": [
        {"name": "h100", "count": 2, "gpusPerNode": 4, "gpuModel": H100}]})
    nodes, devices = nodes_from_spec(spec), cluster_devices(spec)
    half = default_queues(["team"], nodes, {"h100-0000": 4})  # quota: one node's GPUs
    res = Simulation(nodes, jobs, make_preset("gang-scheduler", half), devices=devices).run()
    starts = sorted(-1.0 if o.start_time is None else o.start_time for o in res.outcomes)
    assert starts == [0.0, 100.0, 200.0]
    assert max(s.busy_gpus for s in res.samples) == 4


def whole_node_jobs() -> list[TraceJob]:
    """Single- and multi-node gangs of whole 8-GPU nodes arriving faster than they run."""
    return [job(f"j{i:02d}", i * 17.0, 1 + i % 3, 8, duration=60.0 + 13 * (i % 5),
                devices=False) for i in range(24)]


def mixed_jobs() -> list[TraceJob]:
    """Gangs of 1 to 3 pods of 1, 2, 4 or 8 GPUs: pods smaller than a node, so which node
    each goes to (best fit) decides what is left for the next."""
    return [job(f"j{i:02d}", i * 11.0, 1 + i % 3, (1, 2, 4, 8)[i % 4],
                duration=60.0 + 13 * (i % 5), devices=False) for i in range(40)]


NO_RESERVATIONS = dataclasses.replace(SchedulerPolicy.preset("gang-scheduler"), reservation=False)


@pytest.mark.parametrize(("policy", "scheduler"), [
    ("fifo-gang", None), ("per-pod", None), ("gang-scheduler", NO_RESERVATIONS),
    ("gang-scheduler", None),
], ids=["fifo-gang", "per-pod", "gang-scheduler-no-reservations", "gang-scheduler"])
@pytest.mark.parametrize("make_jobs", [whole_node_jobs, mixed_jobs], ids=["whole-nodes", "mixed"])
def test_devices_or_integer_gpus_give_the_same_start_times(
        policy: str, scheduler: SchedulerPolicy | None,
        make_jobs: Callable[[], list[TraceJob]]) -> None:
    """One device per GPU: the same decisions either way. Reservations included (their
    quick count of free GPUs counts free devices too), and for pods smaller than a node
    (best fit orders nodes by free devices as by free GPUs, and packs device gangs as
    integer ones when the packing meets their claims)."""
    plain = {"pools": [{"name": "v100", "count": 4, "gpusPerNode": 8, "gpuModel": "V100"}]}
    jobs = make_jobs()
    without = replay(plain, jobs, policy, scheduler=scheduler)
    with_devices = replay({**plain, "gpusAsDevices": True}, [claim_devices(j) for j in jobs],
                          policy, scheduler=scheduler)

    def starts(r: SimulationResult) -> dict[str, tuple[float | None, float | None]]:
        return {o.job_id: (o.start_time, o.end_time) for o in r.outcomes}

    assert starts(with_devices) == starts(without)
    assert all(o.end_time is not None for o in with_devices.outcomes)
    assert [dataclasses.astuple(s) for s in with_devices.samples] == [
        dataclasses.astuple(s) for s in without.samples]


def test_a_plan_handing_out_a_held_device_stops_the_simulation() -> None:
    claims = SimulatedClaims(ClusterCache())
    objs = job_objects(job("a", 0, 2, 1), scheduler_name="gang-scheduler", now=0.0,
                       runtime_estimate=None)
    claims.create(objs.pods, objs.templates)
    assert objs.templates == (template_for("team", 1),)
    gpu = DeviceId("gpu.example.com", "n-0", "gpu-0")

    def decision(claim: str) -> PreBind:
        allocation = Allocation((DeviceResult("gpus", gpu),))
        return PreBind(claim, PreBindKind.DEVICES, "n-0", (str(gpu),), allocation)

    first, second = sorted(claims.claims)
    claims.allocate([decision(first)])
    with pytest.raises(RuntimeError, match=f"device {gpu} to {second}, which {first} holds"):
        claims.allocate([decision(second)])
    with pytest.raises(RuntimeError, match="allocated already"):
        claims.allocate([decision(first)])
