"""Devices for a whole gang: the time to place a 64-pod gang whose pods each claim one device
(Dynamic Resource Allocation, a claim per pod made from a template) on 1,000 nodes with 8
devices each, against the same gang asking ``nvidia.com/gpu: 1`` per pod on the same nodes
with 8 GPUs each (issue 35).

    .venv/bin/python benchmarks/bench_dra.py [--nodes 1000] [--pods 64] [--rounds 9]

Two clusters: empty, and with about 70% of the devices (or GPUs) taken at random (by
allocated claims, or by running pods), the same nodes and the same taken share for both; the
rounds alternate which of the two goes first. Timed: ``solve`` from a fresh snapshot each round (the
device inventory's per-node pools are worked out inside the timed call, as in a cycle after
the inventory changed), p50 and p95 over the rounds, and the ratio DRA / plain. Every DRA
placement is checked: 64 claims allocated, no device twice, none already taken.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.model import Gang, Node, PodRef, PodRequirements, Role, RunningGang
from scheduler.model.constraints import DeviceClaimUse, PodConstraints
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import (
    Allocation,
    Ask,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceId,
    DeviceResult,
    DeviceSlice,
    PoolRef,
    Request,
    ResourceClaim,
)
from scheduler.model.resources import Resources
from scheduler.model.volumes import VolumeCatalog
from scheduler.placement import Placement, solve
from scheduler.world.snapshot import Snapshot

DRIVER = "gpu.example.com"
CLASS = DeviceClass("gpu", (f'device.driver == "{DRIVER}"',))
SPEC = ClaimSpec((Request("gpu", (Ask("gpu", "gpu"),)),))
RACK = "topology.gangscheduler.io/rack"


def nodes(count: int, gpus: int) -> list[Node]:
    return [Node.build(f"node-{i:05d}", Resources({"nvidia.com/gpu": gpus, "cpu": 96_000,
                                                    "memory": 1 << 40, "pods": 110}),
                       {RACK: f"r{i // 32:03d}"}) for i in range(count)]


def device_slices(names: list[str], per_node: int) -> list[DeviceSlice]:
    return [DeviceSlice(f"{n}-gpus", DRIVER, PoolRef(n), tuple(
        Device(f"gpu-{i}", ((f"{DRIVER}/index", i), (f"{DRIVER}/model", "h100")))
        for i in range(per_node)), node_name=n) for n in names]


def gang(pods: int, dra: bool) -> tuple[Gang, list[ResourceClaim]]:
    """The gang, and (DRA) the claims the resourceclaim controller made for its pods."""
    if dra:
        req = PodRequirements(Resources({"cpu": 1000, "memory": 1 << 30}), constraints=
                              PodConstraints(device_claims=(DeviceClaimUse("gpu",
                                                                           template="one"),)))
        refs = tuple(PodRef("bench", f"w-{i}", f"uid-{i}", (("gpu", f"w-{i}-gpu"),))
                     for i in range(pods))
        claims = [ResourceClaim("bench", f"w-{i}-gpu", SPEC, f"c-{i}") for i in range(pods)]
    else:
        req = PodRequirements(Resources({"nvidia.com/gpu": 1, "cpu": 1000, "memory": 1 << 30}))
        refs = tuple(PodRef("bench", f"w-{i}", f"uid-{i}") for i in range(pods))
        claims = []
    return Gang(id="bench/train", uid="train", namespace="bench", name="train", queue="q",
                roles=(Role("worker", pods, req, pods=refs),)), claims


def occupied(names: list[str], per_node: int, share: float, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    return {n: sum(rng.random() < share for _ in range(per_node)) for n in names}


def snapshot(count: int, per_node: int, dra: bool, used: dict[str, int],
             claims: list[ResourceClaim]) -> Snapshot:
    if not dra:
        snap = Snapshot(nodes(count, per_node))
        allocs = tuple((n, Resources({"nvidia.com/gpu": k})) for n, k in used.items() if k)
        occupant, _ = gang(1, dra=False)
        return snap.with_running(RunningGang(occupant, allocs, start_time=0.0))
    snap = Snapshot(nodes(count, 0))
    held = [ResourceClaim("other", f"held-{n}", SPEC, f"h-{n}", Allocation(tuple(
        DeviceResult("gpu", DeviceId(DRIVER, n, f"gpu-{i}")) for i in range(k))))
        for n, k in used.items() if k]
    inventory = DeviceInventory.of(device_slices(list(used), per_node), (CLASS,),
                                   [*claims, *held])
    return snap.with_volumes(VolumeCatalog(devices=inventory))


def check(placement: Placement, pods: int, used: dict[str, int]) -> None:
    devices = [d for p in placement.prebinds for d in p.devices]
    assert len(placement.prebinds) == pods and len(set(devices)) == pods, placement.prebinds
    for p in placement.prebinds:
        (device,) = p.devices
        _, node, name = device.split("/")
        assert int(name.split("-")[1]) >= 0 and node == p.target


def measure_once(count: int, per_node: int, pods: int, dra: bool, share: float,
                 seed: int) -> float:
    """One timed solve of the gang on a fresh snapshot (DRA placements checked)."""
    names = [n.name for n in nodes(count, per_node)]
    used = occupied(names, per_node, share, seed)
    g, claims = gang(pods, dra)
    snap = snapshot(count, per_node, dra, used, claims)
    start = time.perf_counter()
    result = solve(g, snap)
    elapsed = time.perf_counter() - start
    assert isinstance(result, Placement), result
    if dra:
        check(result, pods, used)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--devices", type=int, default=8, help="devices (GPUs) per node")
    parser.add_argument("--pods", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"{args.pods}-pod gang, one device per pod, {args.nodes} nodes x {args.devices} "
          f"devices, {args.rounds} rounds")
    for share in (0.0, 0.7):
        times: dict[bool, list[float]] = {False: [], True: []}
        for r in range(args.rounds):  # the two alternate which goes first
            for dra in ((False, True) if r % 2 == 0 else (True, False)):
                times[dra].append(measure_once(args.nodes, args.devices, args.pods, dra, share,
                                               args.seed))
        row = {}
        for dra in (False, True):
            t = times[dra]
            row[dra] = statistics.median(t)
            p95 = sorted(t)[max(0, int(len(t) * 0.95) - 1)]
            kind = "DRA claims " if dra else "nvidia.com/gpu"
            print(f"  {int(share * 100):>2}% taken  {kind:<14}  p50 {row[dra] * 1000:8.1f} ms  "
                  f"p95 {p95 * 1000:8.1f} ms")
        print(f"  {int(share * 100):>2}% taken  DRA / plain     {row[True] / row[False]:.1f}x")


if __name__ == "__main__":
    main()
