"""The simulated cluster's DRA devices: what a GPU driver would publish for the nodes of the
pools a cluster description offers as devices (``gpusAsDevices``, ``pools[].draDevices``).

Why here and not in the nodes: a node whose GPUs are devices has no ``nvidia.com/gpu`` at all
(a node runs either the GPU device plugin or a DRA driver, not both, or one GPU would be handed
out twice), so what the simulator counts as a node's GPUs (accounting, default quotas) is its
integer GPUs plus its devices, and the devices themselves live in the cache's facts like the
ResourceSlices and DeviceClasses the live scheduler watches. Which devices a node has, and
their attributes, is ``scheduler.world.gpu_devices``: the same as the dev cluster's driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.feed.cache import ClusterCache
from scheduler.feed.facts import ClusterFacts
from scheduler.model import GPU_PRODUCT_LABEL, Node
from scheduler.model.demand import gpus_of
from scheduler.model.devices import DeviceClass, DeviceSlice
from scheduler.world import clusterspec, gpu_devices


@dataclass(frozen=True, slots=True)
class ClusterDevices:
    """The slices (one per node) and classes (one for the driver, one per GPU model) of a
    simulated cluster, and the GPUs each node offers as devices."""

    slices: tuple[DeviceSlice, ...] = ()
    classes: tuple[DeviceClass, ...] = ()
    gpus: Mapping[str, int] = field(default_factory=dict)  # node -> devices (1 GPU each)

    def publish(self, cache: ClusterCache) -> None:
        """Put the slices and classes in *cache*, as the informers would."""
        if not (self.slices or self.classes):
            return

        def put(facts: ClusterFacts) -> bool:
            changed = [facts.set_slice(s.name, s) for s in self.slices]
            changed += [facts.set_device_class(c.name, c) for c in self.classes]
            return any(changed)

        cache.change_facts(put)


NO_DEVICES = ClusterDevices()


def cluster_devices(spec: clusterspec.ClusterSpec) -> ClusterDevices:
    """The devices of *spec*'s device pools (``ClusterSpec.device_pools``), in node order."""
    pools = spec.device_pools()
    if not pools:
        return NO_DEVICES
    slices: list[DeviceSlice] = []
    gpus: dict[str, int] = {}
    products: set[str] = set()
    for d in spec.nodes():
        if d.pool not in pools:
            continue
        product = d.labels.get(GPU_PRODUCT_LABEL) or gpu_devices.UNLABELLED_PRODUCT
        count = next(p.gpus_per_node for p in spec.pools if p.name == d.pool)
        clique = gpu_devices.clique_id(d.name, d.labels, spec.topology_labels)
        slices.append(gpu_devices.node_slice(d.name, product, count, clique))
        gpus[d.name] = count
        products.add(product)
    classes = [gpu_devices.device_class(None)]
    classes += [gpu_devices.device_class(p) for p in sorted(products)]
    return ClusterDevices(tuple(slices), tuple(classes), gpus)


def node_gpus(nodes: Iterable[Node], devices: ClusterDevices = NO_DEVICES) -> dict[str, int]:
    """Each node's GPUs, whether ``nvidia.com/gpu`` or devices."""
    return {n.name: gpus_of(n.allocatable) + devices.gpus.get(n.name, 0) for n in nodes}
