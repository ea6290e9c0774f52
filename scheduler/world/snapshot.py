"""An immutable per-cycle view of the cluster that decisions are made against.

The cache builds one ``Snapshot`` per cycle from plain lists (no cluster needed, which is
what lets the simulator and the tests build one too). During the cycle, each decision
derives a new snapshot (``with_running`` after a placement, ``without`` to try a set of
releases: preemption victims, gangs that will have ended); the original is never touched, so
undoing a simulated removal is simply using the old snapshot again.

Deriving is cheap: the nodes and what is derived from them alone (eligibility, pools, the
topology graph) live in a shared ``NodeIndex``; only the per-node free vectors of the changed
nodes are replaced. The cluster cache keeps one index while the nodes stay the same, so the
snapshots of many cycles share it too.

The running pods as other pods' constraints see them (labels, affinity terms, host ports,
claims) are an ``Occupancy`` that is derived along with the snapshot at no cost until a
solve reads it; namespaces' labels and the volume catalog (claims, PVs, classes, attach
limits) are carried as they are, the catalog replaced when a placement decides claims.

Each snapshot also carries a short ``lineage``: for itself and its nearest ancestors, the
nodes whose free resources changed since. The solver keeps indexes of free capacity in the
node index and uses the lineage to bring an index from the snapshot it last served to the one
at hand by touching only those nodes, instead of rescanning every node per placement.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from scheduler.kit.layered import Layered
from scheduler.model import DEFAULT_TOPOLOGY_LABELS, Node, RunningGang
from scheduler.model.demand import gpus_of
from scheduler.model.elastic import shrunk
from scheduler.model.labels import NO_LABELS, Labels
from scheduler.model.release import Release
from scheduler.model.resources import EMPTY, Resources, total
from scheduler.model.volumes import EMPTY_CATALOG, VolumeCatalog
from scheduler.world import releasing
from scheduler.world.node_index import NodeIndex
from scheduler.world.node_queries import NodeQueries
from scheduler.world.occupancy import Occupancy, Occupant
from scheduler.world.queue_usage import QueueUsage

#: How many ancestors a snapshot remembers the changed nodes for.
_LINEAGE_DEPTH = 8
_NOTHING: frozenset[str] = frozenset()


class Snapshot(NodeQueries):
    """Nodes with their used and free resources, and the running gangs charged to them."""

    __slots__ = ("_free", "_index", "_lineage", "_namespaces", "_occupancy", "_queues",
                 "_running", "_terminating", "_timed", "_version", "_volumes")

    def __init__(
        self,
        nodes: Iterable[Node],
        running: Iterable[RunningGang] = (),
        other_usage: Mapping[str, Resources] | None = None,
        *,
        topology_labels: Iterable[str] = DEFAULT_TOPOLOGY_LABELS,
        other_pods: Iterable[Occupant] = (),
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        volumes: VolumeCatalog = EMPTY_CATALOG,
    ) -> None:
        """Build from plain lists.

        ``other_usage`` is what pods outside any gang (e.g. of the default scheduler) use
        per node: it counts against capacity but is never a preemption candidate.
        ``topology_labels`` are the label keys the nodes' topology paths were derived with
        (``NodeLabelConfig.topology_labels``), outermost first. ``other_pods`` are those
        pods' labels, terms, ports and claims (for other pods' constraints); ``namespaces``
        the namespaces' labels; ``volumes`` the claims, PVs and classes.
        """
        self._build(NodeIndex(nodes, tuple(topology_labels)), running, other_usage,
                    other_pods, namespaces, volumes)

    @classmethod
    def on(cls, index: NodeIndex, running: Iterable[RunningGang] = (),
           other_usage: Mapping[str, Resources] | None = None, *,
           other_pods: Iterable[Occupant] = (),
           namespaces: Mapping[str, Mapping[str, str]] | None = None,
           volumes: VolumeCatalog = EMPTY_CATALOG) -> Snapshot:
        """A snapshot of the nodes of *index*, sharing it (the cluster cache's way: one
        index for as long as the nodes do not change)."""
        snap = cls.__new__(cls)
        snap._build(index, running, other_usage, other_pods, namespaces, volumes)
        return snap

    def _build(self, index: NodeIndex, running: Iterable[RunningGang],
               other_usage: Mapping[str, Resources] | None, other_pods: Iterable[Occupant],
               namespaces: Mapping[str, Mapping[str, str]] | None,
               volumes: VolumeCatalog) -> None:
        self._index = index
        # Namespaces are not node-derived: they are the snapshot's, not the index's.
        self._namespaces: dict[str, Labels] = {
            ns: Labels(labels) for ns, labels in sorted((namespaces or {}).items())}
        self._version = next(index.versions)
        self._lineage: dict[int, frozenset[str]] = {self._version: _NOTHING}
        self._running: Layered[str, RunningGang] = Layered({
            g.id: g for g in sorted(running, key=lambda g: g.id)})
        self._terminating = frozenset(gid for gid, g in self._running.items() if g.terminating)
        self._timed = frozenset(gid for gid, g in self._running.items() if g.gang.max_runtime)
        used: dict[str, dict[str, int]] = {name: {} for name in index.node_names}
        for name, res in (other_usage or {}).items():
            if name in used:
                _accumulate(used[name], res)
        for rg in self._running.values():
            for name, res in rg.allocations:
                if name in used:
                    _accumulate(used[name], res)
        nodes_by_name = index.nodes
        self._free: Layered[str, Resources] = Layered({
            name: nodes_by_name[name].allocatable - u for name, u in used.items()
        })
        self._queues = QueueUsage.of(self._running.values(), nodes_by_name)
        self._occupancy = Occupancy(tuple(other_pods), self._running)
        self._volumes = volumes

    @classmethod
    def _derive(cls, parent: Snapshot, free: Layered[str, Resources],
                running: Layered[str, RunningGang], changed: Iterable[str],
                queues: QueueUsage | None = None,
                occupancy: Occupancy | None = None,
                terminating: frozenset[str] | None = None,
                timed: frozenset[str] | None = None) -> Snapshot:
        snap = cls.__new__(cls)
        snap._terminating = parent._terminating if terminating is None else terminating
        snap._timed = parent._timed if timed is None else timed
        snap._index = parent._index
        snap._namespaces = parent._namespaces
        snap._free = free
        snap._running = running
        snap._occupancy = parent._occupancy if occupancy is None else occupancy
        snap._volumes = parent._volumes
        snap._queues = parent._queues if queues is None else queues
        snap._version = next(parent._index.versions)
        delta = frozenset(changed)
        lineage = {snap._version: _NOTHING}
        for version, since in itertools.islice(parent._lineage.items(), _LINEAGE_DEPTH - 1):
            lineage[version] = since | delta if delta else since
        snap._lineage = lineage
        return snap

    # Reading ------------------------------------------------------------------------------
    @property
    def running(self) -> Mapping[str, RunningGang]:
        return self._running

    @property
    def terminating(self) -> frozenset[str]:
        """The running gangs whose pods are being deleted (kept as snapshots are derived)."""
        return self._terminating

    @property
    def timed(self) -> frozenset[str]:
        """The running gangs that carry a runtime limit of their own (the
        ``gangscheduler.io/max-runtime`` annotation), kept as snapshots are derived: the
        runaway guards ask every cycle, and most clusters have none."""
        return self._timed

    @property
    def free_by_node(self) -> Mapping[str, Resources]:
        return self._free

    @property
    def queue_usage(self) -> Mapping[tuple[str, str], Resources]:
        """(queue, pool) -> what the running gangs of the queue use on nodes of the pool.

        Kept up to date as snapshots are derived (a gang's own nodes only), so the quota
        ledger and the per-queue tallies never sum every running gang. Zero usage is absent.
        """
        return self._queues.usage

    @property
    def running_per_queue(self) -> Mapping[str, int]:
        """Queue -> how many of the running gangs are its (queues with none are absent)."""
        return self._queues.count

    def free(self, node: str) -> Resources:
        return self._free.get(node, EMPTY)

    def free_gpus(self, node: str) -> int:
        """GPUs free on *node*: its free ``nvidia.com/gpu`` plus at most what the free devices
        of its node-local slices count for (``DeviceInventory.free_by_node``). What best fit
        orders nodes by, so pods whose GPUs come from device claims pack as tightly as
        integer ones, and what quick counts ("could the gang fit after these gangs end")
        compare with demand. Never less than the truth; every placement still checks
        requests and allocates devices."""
        gpus = gpus_of(self._free.get(node, EMPTY))
        devices = self._volumes.devices
        if devices.slices:
            gpus += devices.free_by_node().get(node, 0)
        return gpus if gpus > 0 else 0

    def used(self, node: str) -> Resources:
        return self._index.nodes[node].allocatable - self._free[node]

    def total_free(self, pool: str | None = None) -> Resources:
        nodes = self._index.nodes
        return total(f.clamp_nonnegative() for name, f in self._free.items()
                     if pool in (None, nodes[name].pool))

    @property
    def version(self) -> int:
        """Identifies this snapshot among those derived from the same original one."""
        return self._version

    @property
    def lineage(self) -> Mapping[int, frozenset[str]]:
        """Version -> nodes whose free resources differ from that snapshot's, nearest first.

        Covers this snapshot (nothing changed) and its few nearest ancestors; solver indexes
        use it to catch up incrementally and rebuild when the version they have is not listed.
        """
        return self._lineage

    def changed_since(self, before: Snapshot) -> Iterable[str] | None:
        """Nodes whose free resources may differ from *before*'s (a superset), or None when
        the two are not closely related (then every node may differ)."""
        if before._index is not self._index:
            return None
        since = self._lineage.get(before._version)
        if since is not None:
            return since
        return self._free.differing(before._free)

    @property
    def pods(self) -> Occupancy:
        """The running pods' labels, terms, ports and claims, per node (lazy)."""
        return self._occupancy

    def namespace_labels(self, namespace: str) -> Labels:
        """A namespace's labels (empty for an unknown one, as kube-scheduler assumes)."""
        return self._namespaces.get(namespace, NO_LABELS)

    @property
    def volumes(self) -> VolumeCatalog:
        """Claims, PVs, storage classes and attach limits (with this cycle's decisions)."""
        return self._volumes

    # Deriving -----------------------------------------------------------------------------
    def with_running(self, gang: RunningGang) -> Snapshot:
        """A snapshot in which *gang* is also running (assume a placement)."""
        changed: dict[str, Resources] = {}
        for name, res in gang.allocations:
            changed[name] = (changed[name] if name in changed else self._free[name]) - res
        free = self._free.set(changed.items())
        old = self._running.get(gang.id)
        queues = self._queues.moved(self._index.nodes, () if old is None else (old,), (gang,))
        running = self._running.set(((gang.id, gang),))
        return Snapshot._derive(self, free, running, changed, queues,
                                self._occupancy.derive(running, (gang,), ()),
                                _flagged(self._terminating, gang.id, gang.terminating),
                                _flagged(self._timed, gang.id, bool(gang.gang.max_runtime)))

    def with_replaced(self, gang: RunningGang) -> Snapshot:
        """A snapshot in which the running gang of *gang*'s id is *gang* now (an elastic
        gang grown or shrunk: ``scheduler.model.elastic``); its device claims stay."""
        if gang.id in self._running:
            return self.without_gangs((gang.id,), ending=False).with_running(gang)
        return self.with_running(gang)

    def with_volumes(self, volumes: VolumeCatalog) -> Snapshot:
        """A snapshot whose volume catalog is *volumes* (claim decisions assumed)."""
        if volumes is self._volumes:
            return self
        snap = Snapshot._derive(self, self._free, self._running, ())
        snap._volumes = volumes
        return snap

    def with_usage(self, node: str, res: Resources) -> Snapshot:
        """A snapshot in which *res* more is used on *node* by something that is not a gang."""
        free = self._free.set(((node, self._free[node] - res),))
        return Snapshot._derive(self, free, self._running, (node,))

    def without(self, releases: Iterable[Release]) -> Snapshot:
        """A snapshot with these releases taken (simulated preemption, gangs that will have
        ended). A whole release takes the gang away as this snapshot has it; a partial one
        leaves the gang running without the released members (``elastic.shrunk``); parts
        of one gang that add up to all of it are the whole gang. Either way the members
        taken free their resources and their device claims (``scheduler.world.releasing``).

        The receiver is unchanged, so the removal is undone by keeping the old snapshot.
        """
        releases = releasing.merged(releases)
        ids = {r.id for r in releases if r.part is None}
        snap = self._without_ids(ids) if ids else self
        partial = [r for r in releases if r.part is not None]
        for r in partial:
            snap = snap.with_replaced(shrunk(snap.running.get(r.id, r.running), frozenset(r.pods)))
        if partial:
            snap = snap.with_volumes(releasing.claims_released(
                snap._volumes, releasing.partial_uids(partial)))
        return snap

    def without_gangs(self, gang_ids: Iterable[str], *, ending: bool = True) -> Snapshot:
        """``without`` the whole gangs of these ids. *ending* False: they are taken out only
        to be put back as they are now (the cache replacing a changed running gang), so
        their device claims stay as the catalog has them; an ending gang's go with it."""
        ids = set(gang_ids)
        return self._without_ids(ids, ending) if ids else self

    def _without_ids(self, ids: set[str], ending: bool = True) -> Snapshot:
        gone = tuple(sorted(ids))
        missing = [gid for gid in gone if gid not in self._running]
        if missing:
            raise KeyError(f"gang {missing[0]} is not running in this snapshot")
        removed = [self._running[gid] for gid in gone]
        changed = releasing.free_after(self._free, removed)
        left = self._running.without(gone)
        snap = Snapshot._derive(self, self._free.set(changed.items()), left, changed,
                                self._queues.moved(self._index.nodes, removed),
                                self._occupancy.derive(left, (), gone),
                                self._terminating - ids if self._terminating & ids else None,
                                self._timed - ids if self._timed & ids else None)
        if ending:  # their device claims go with them (PodGroups' too)
            snap._volumes = releasing.claims_released(self._volumes,
                                                      releasing.leaving_uids(removed))
        return snap


def _flagged(ids: frozenset[str], gid: str, flag: bool) -> frozenset[str]:
    """*ids* with *gid* in it when *flag*, else without it (itself when unchanged)."""
    if flag:
        return ids if gid in ids else ids | {gid}
    return ids - {gid} if gid in ids else ids


def _accumulate(into: dict[str, int], res: Mapping[str, int]) -> None:
    for k, v in res.items():
        into[k] = into.get(k, 0) + v
