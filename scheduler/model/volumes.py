"""Persistent volumes, claims, storage classes and per-node attach limits, as the scheduler
needs them (the decisions placement makes about claims: ``scheduler.model.prebind``).

Why in the model: kube-scheduler's VolumeBinding, VolumeZone, VolumeRestrictions and
NodeVolumeLimits plugins decide on these objects, and so does our placement core; the
catalog is immutable and carried by the snapshot, and a decision made for one gang in a
cycle (a claim bound to a static PV, or provisioned for a node) is assumed in the catalog
the next gang of that cycle sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.model.device_inventory import EMPTY_INVENTORY, DeviceInventory
from scheduler.model.labels import NO_LABELS, Labels, LabelSelector
from scheduler.model.pods import NodeSelectorTerm

#: What kube-scheduler's VolumeBinding writes on a WaitForFirstConsumer claim to provision.
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
#: Set by the PV controller once a claim is bound (``isPVCFullyBound``).
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
#: The zone and region labels VolumeZone compares (beta and GA spellings).
ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
               "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
_GA = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
       "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}


def ga_label(key: str) -> str:
    return _GA.get(key, key)


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    wait_for_consumer: bool = False  # volumeBindingMode: WaitForFirstConsumer
    #: ``allowedTopologies`` as node selector terms (OR'ed); empty: anywhere.
    allowed_topologies: tuple[NodeSelectorTerm, ...] = ()

    @property
    def provisions(self) -> bool:
        return bool(self.provisioner) and self.provisioner != "kubernetes.io/no-provisioner"

    def allows(self, labels: Mapping[str, str]) -> bool:
        return not self.allowed_topologies or any(t.matches(labels)
                                                  for t in self.allowed_topologies)


class VolumePhase(StrEnum):
    PENDING = "Pending"
    AVAILABLE = "Available"
    BOUND = "Bound"
    RELEASED = "Released"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Volume:
    """A PersistentVolume."""

    name: str
    capacity: int = 0  # bytes
    access_modes: frozenset[str] = frozenset()
    storage_class: str = ""
    volume_mode: str = "Filesystem"
    #: ``spec.nodeAffinity.required.nodeSelectorTerms`` (OR'ed); empty: reachable everywhere.
    node_affinity: tuple[NodeSelectorTerm, ...] = ()
    labels: Labels = NO_LABELS
    claim_ref: ClaimRef | None = None
    phase: VolumePhase = VolumePhase.AVAILABLE
    csi_driver: str = ""
    csi_handle: str = ""
    terminating: bool = False
    attributes_class: str = ""
    #: Not compared: an update that changed nothing the scheduler reads is no change.
    resource_version: str = field(default="", compare=False)

    def reaches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """Its node affinity admits the node (``volume.CheckNodeAffinity``)."""
        return not self.node_affinity or any(t.matches(labels, node_name)
                                             for t in self.node_affinity)

    def zones(self) -> tuple[tuple[str, frozenset[str]], ...]:
        """(label, allowed values) pairs VolumeZone checks (``a__b`` lists several)."""
        return tuple((k, frozenset(self.labels[k].split("__"))) for k in ZONE_LABELS
                     if k in self.labels)


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim."""

    namespace: str
    name: str
    uid: str = ""
    storage_class: str = ""  # the beta annotation, else spec.storageClassName, else ""
    volume_name: str = ""
    bind_completed: bool = False
    lost: bool = False
    request: int = 0  # bytes
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = "Filesystem"
    selector: LabelSelector | None = None
    selected_node: str = ""
    terminating: bool = False
    attributes_class: str = ""
    #: Not compared: an update that changed nothing the scheduler reads is no change.
    resource_version: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """Fully bound (kube-scheduler's ``isPVCFullyBound``)."""
        return bool(self.volume_name) and self.bind_completed

    @property
    def read_write_once_pod(self) -> bool:
        return "ReadWriteOncePod" in self.access_modes


@dataclass(frozen=True, slots=True)
class VolumeCatalog:
    """Every claim, PV, class and CSINode limit the scheduler knows, by name, and the
    devices of Dynamic Resource Allocation (``devices``: its own claims and classes)."""

    claims: Mapping[str, Claim] = field(default_factory=dict)  # by namespace/name
    volumes: Mapping[str, Volume] = field(default_factory=dict)  # by name
    classes: Mapping[str, StorageClass] = field(default_factory=dict)
    #: node -> CSI driver -> how many volumes of that driver the node can attach.
    attach_limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    devices: DeviceInventory = EMPTY_INVENTORY

    @classmethod
    def of(cls, claims: Iterable[Claim] = (), volumes: Iterable[Volume] = (),
           classes: Iterable[StorageClass] = (),
           attach_limits: Mapping[str, Mapping[str, int]] | None = None,
           devices: DeviceInventory = EMPTY_INVENTORY) -> VolumeCatalog:
        return cls({c.key: c for c in sorted(claims, key=lambda c: c.key)},
                   {v.name: v for v in sorted(volumes, key=lambda v: v.name)},
                   {c.name: c for c in sorted(classes, key=lambda c: c.name)},
                   dict(sorted((attach_limits or {}).items())), devices)

    @property
    def empty(self) -> bool:
        return not self.claims


EMPTY_CATALOG = VolumeCatalog()
