"""Small builders for device tests: a node's GPUs with NUMA nodes, classes, claims."""

from __future__ import annotations

from scheduler.model.devices import (
    AllocationMode,
    Ask,
    ClaimSpec,
    Constraint,
    Device,
    DeviceClass,
    DeviceSlice,
    PoolRef,
    Request,
    ResourceClaim,
)

D = "gpu.example.com"
GPU_CLASS = DeviceClass("gpu", (f'device.driver == "{D}"',))
CLASSES = {"gpu": GPU_CLASS,
           "a100": DeviceClass("a100", (f'device.driver == "{D}"',
                                        f'device.attributes["{D}"].model == "a100"'))}


def gpu(i: int, numa: int = 0, model: str = "a100", **extra: object) -> Device:
    attrs = {f"{D}/numa": numa, f"{D}/model": model, f"{D}/index": i,
             **{f"{D}/{k}": v for k, v in extra.items()}}
    return Device(f"gpu-{i}", tuple(sorted(attrs.items())))  # type: ignore[arg-type]


def node_slice(node: str, devices: tuple[Device, ...], generation: int = 0, count: int = 1,
               name: str = "") -> DeviceSlice:
    return DeviceSlice(name or f"{node}-gpus", D, PoolRef(node, generation, count), devices,
                       node_name=node)


def eight_gpus(node: str = "n1") -> DeviceSlice:
    """Eight GPUs, four per NUMA node."""
    return node_slice(node, tuple(gpu(i, i // 4) for i in range(8)))


def ask(name: str, count: int = 1, cls: str = "gpu", *selectors: str,
        mode: AllocationMode = AllocationMode.EXACT_COUNT, admin: bool = False) -> Ask:
    return Ask(name, cls, tuple(selectors), mode, count, admin)


def claim(name: str, *requests: Request | Ask, constraints: tuple[Constraint, ...] = (),
          namespace: str = "ns", unsupported: tuple[str, ...] = ()) -> ResourceClaim:
    reqs = tuple(r if isinstance(r, Request) else Request(r.name, (r,)) for r in requests)
    return ResourceClaim(namespace, name, ClaimSpec(reqs, constraints, unsupported))


def first_available(name: str, *asks: Ask) -> Request:
    return Request(name, tuple(Ask(f"{name}/{a.name}", a.class_name, a.selectors, a.mode,
                                   a.count, a.admin_access, a.unsupported) for a in asks),
                   first_available=True)
