"""Which published devices a node can use: the pools of ResourceSlices that reach it, at
their newest generation, as kube-scheduler's DRA allocator gathers them.

A driver republishes a pool by bumping its generation in every slice; until all
``resourceSliceCount`` slices of the newest generation are seen the pool is *incomplete*:
its devices are not handed out (an ``All`` request refuses to go ahead at all, since "all" is
not known yet). A pool whose newest generation has no slice for this node while an older one
does is being replaced: ignored. A pool with a device name twice is *invalid*, and so is one
whose counters do not add up (``device_counters.pool_problem``). A slice of counter sets
(``sharedCounters``) belongs to every node its pool reaches, as upstream has it: its sets
are what the pool's partitionable devices take from. A slice with a field we do not
implement (``perDeviceNodeSelection``) leaves its pool out, and a device with one
(``taints``...) is not offered: either is kept as a note (``left_out``) that a failure
reason shows, never silently.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.model.device_counters import pool_problem
from scheduler.model.devices import CounterSet, Device, DeviceId, DeviceSlice
from scheduler.model.pods import (
    NODE_NAME_FIELD,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    SelectorOperator,
)


@dataclass(frozen=True, slots=True)
class Offered:
    """A device a node can be given, and the slice's word on where it can be used."""

    id: DeviceId
    device: Device
    slice_node: str = ""  # node-local: the node
    slice_selector: NodeSelectorTerm | None = None  # network-attached: where


@dataclass(frozen=True, slots=True)
class PoolView:
    """One pool as one node sees it."""

    driver: str
    pool: str
    devices: tuple[Offered, ...] = ()
    incomplete: bool = False
    invalid: str = ""  # why the pool cannot be used at all
    #: The pool's ``sharedCounters``, and every device of it that consumes from them (offered
    #: or not: an allocated one takes its counters either way).
    counter_sets: tuple[CounterSet, ...] = ()
    consumers: tuple[tuple[DeviceId, Device], ...] = ()

    @property
    def usable(self) -> bool:
        return not self.incomplete and not self.invalid

    @property
    def name(self) -> str:
        return f"{self.driver}/{self.pool}"


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """Every pool reaching one node, sorted by (driver, pool), and what was left out."""

    node: str
    pools: tuple[PoolView, ...] = ()
    left_out: tuple[str, ...] = ()  # "gpu.example.com/pool/dev: taints", ...

    def offered(self) -> Iterable[Offered]:
        """The devices of the usable pools, in search order."""
        for pool in self.pools:
            if pool.usable:
                yield from pool.devices


def node_devices(slices: Iterable[DeviceSlice], node: str,
                 labels: Mapping[str, str]) -> NodeDevices:
    """The pools of *slices* that reach *node* (with *labels*), as of their newest
    generation (``GatherPools``)."""
    everything = tuple(slices)
    mine: dict[tuple[str, str], list[DeviceSlice]] = defaultdict(list)
    for s in everything:
        if not s.reaches(node, labels) and not s.counter_sets:
            continue
        key = (s.driver, s.pool.name)
        have = mine[key]
        if have and s.pool.generation < have[0].pool.generation:
            continue
        if have and s.pool.generation > have[0].pool.generation:
            have.clear()
        have.append(s)
    pools: list[PoolView] = []
    left_out: list[str] = []
    for (driver, pool), found in sorted(mine.items()):
        generation, count = found[0].pool.generation, found[0].pool.slice_count
        if len(found) != count:
            same = [s for s in everything if (s.driver, s.pool.name) == (driver, pool)]
            if any(s.pool.generation > generation for s in same):
                continue  # being replaced by a generation with nothing for this node
            if sum(s.pool.generation == generation for s in same) != count:
                pools.append(PoolView(driver, pool, incomplete=True))
                left_out.append(f"pool {driver}/{pool}: incomplete (generation {generation} "
                                f"has {count} slices, fewer are published)")
                continue
        view = _pool(driver, pool, sorted(found, key=lambda s: s.name), left_out)
        pools.append(view)
    return NodeDevices(node, tuple(pools), tuple(left_out))


def _pool(driver: str, pool: str, found: list[DeviceSlice], left_out: list[str]) -> PoolView:
    unsupported = sorted({f for s in found for f in s.unsupported})
    if unsupported:
        why = f"{', '.join(unsupported)} not supported"
        left_out.append(f"pool {driver}/{pool}: {why}")
        return PoolView(driver, pool, invalid=why)
    counter_sets = tuple(c for s in found for c in s.counter_sets)
    problem = pool_problem(counter_sets, (d for s in found for d in s.devices))
    if problem:
        left_out.append(f"pool {driver}/{pool}: {problem}")
        return PoolView(driver, pool, invalid=problem)
    names: set[str] = set()
    offered: list[Offered] = []
    consumers: list[tuple[DeviceId, Device]] = []
    for s in found:
        for d in s.devices:
            if d.name in names:
                why = f"duplicate device name {d.name}"
                left_out.append(f"pool {driver}/{pool}: {why}")
                return PoolView(driver, pool, invalid=why)
            names.add(d.name)
            did = DeviceId(driver, pool, d.name)
            if d.consumes:
                consumers.append((did, d))
            if d.unsupported:
                left_out.append(f"{did}: {', '.join(d.unsupported)} not supported")
                continue
            offered.append(Offered(did, d, s.node_name, s.node_selector))
    return PoolView(driver, pool, tuple(offered), counter_sets=counter_sets,
                    consumers=tuple(consumers))


def reach_of(devices: Iterable[Offered], node: str) -> NodeSelectorTerm | None:
    """Where an allocation of *devices* can be used (``createNodeSelector``): the node, if
    one device is node-local; else the requirements of the slices' selectors together;
    ``None`` (everywhere) when every slice reaches all nodes."""
    expressions: list[NodeSelectorRequirement] = []
    fields: list[NodeSelectorRequirement] = []
    for o in devices:
        if o.slice_node:
            return NodeSelectorTerm(match_fields=(NodeSelectorRequirement(
                NODE_NAME_FIELD, SelectorOperator.IN, (o.slice_node,)),))
        if o.slice_selector is not None:
            for r in o.slice_selector.match_expressions:
                if r not in expressions:
                    expressions.append(r)
            for r in o.slice_selector.match_fields:
                if r not in fields:
                    fields.append(r)
    if not expressions and not fields:
        return None
    return NodeSelectorTerm(tuple(expressions), tuple(fields))
