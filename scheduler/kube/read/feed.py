"""Wiring informers to the cluster cache: convert, skip the malformed, upsert or delete.

Why here: conversion errors are an edge concern. A malformed object is logged once per event
with its field path and skipped; the cache keeps that object's last good state and every other
object keeps flowing.

PriorityClasses are resolved here too: the Priority admission plugin normally writes
``spec.priority`` when a pod is created, but a cluster with the plugin off creates pods
without it, and ordering and preemption would treat every such pod as priority 0. A pod with
no ``spec.priority`` gets the value of its ``priorityClassName``, else of the
``globalDefault`` class, else 0 (what admission would have written); the core never sees a
PriorityClass.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Protocol

import structlog

from scheduler.feed.facts import ClusterFacts
from scheduler.kube.client import KubeClient
from scheduler.kube.read import (
    convert,
    devices_convert,
    hami_feed,
    informer,
    jobset_convert,
    native_convert,
    operator_convert,
    slices_convert,
    storage,
)
from scheduler.kube.read.input_warnings import InputWarnings
from scheduler.model import Node, NodeLabelConfig
from scheduler.model.native import NativeGroupInfo, WorkloadInfo
from scheduler.model.workloads import JobInfo, JobSetInfo, PodGroupInfo, PodInfo

log = structlog.get_logger()


class Cache(Protocol):
    """The part of ``scheduler.feed.cache.ClusterCache`` the informers feed."""

    def upsert_node(self, node: Node) -> None: ...
    def delete_node(self, name: str) -> None: ...
    def upsert_pod(self, pod: PodInfo) -> None: ...
    def delete_pod(self, uid: str) -> None: ...
    def upsert_group(self, group: PodGroupInfo) -> None: ...
    def delete_group(self, key: str) -> None: ...
    def upsert_job(self, job: JobInfo) -> None: ...
    def delete_job(self, key: str) -> None: ...
    def upsert_jobset(self, jobset: JobSetInfo) -> None: ...
    def delete_jobset(self, key: str) -> None: ...
    def upsert_operator_job(self, kind: str, job: JobInfo) -> None: ...
    def delete_operator_job(self, kind: str, key: str) -> None: ...
    def upsert_native_group(self, group: NativeGroupInfo) -> None: ...
    def delete_native_group(self, key: str) -> None: ...
    def upsert_workload(self, workload: WorkloadInfo) -> None: ...
    def delete_workload(self, key: str) -> None: ...
    def change_facts(self, change: Callable[[ClusterFacts], bool], *,
                     namespaces: bool = False) -> None: ...


Unusable = Callable[[dict[str, Any], str | None], None]  # (object, why or None once usable)


def converting_handler(to_model: Callable[[dict[str, Any]], Any],
                       upsert: Callable[[Any], None],
                       delete: Callable[[dict[str, Any]], None],
                       unusable: Unusable | None = None) -> informer.Handler:
    """A handler that converts each object before *upsert*; DELETED objects go to *delete* raw.
    An object that does not convert is skipped, logged, and told to *unusable* (which says so
    on the object: ``InputWarnings``)."""

    def handle(event: informer.EventType, obj: dict[str, Any]) -> None:
        if event is informer.EventType.DELETED:
            delete(obj)
            return
        try:
            value = to_model(obj)
        except convert.ConversionError as exc:
            if unusable is not None:
                unusable(obj, f"{exc.path}: {exc.reason}" if exc.path else exc.reason)
            else:
                log.warning("object_skipped", kind=exc.kind, object=exc.key, field=exc.path,
                            reason=exc.reason)
            return
        if unusable is not None:
            unusable(obj, None)
        upsert(value)

    return handle


def _meta(obj: dict[str, Any], key: str) -> str:
    return str((obj.get("metadata") or {}).get(key) or "")


def _unresolved(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's spec when admission left ``spec.priority`` unset, else None."""
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) and spec.get("priority") is None else None


class PriorityClasses:
    """The PriorityClasses by name, and the priority they give a pod admission did not resolve."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._classes: dict[str, convert.PriorityClassInfo] = {}

    def upsert(self, pc: convert.PriorityClassInfo) -> bool:
        """Record *pc*; True if that changed what a pod may resolve to."""
        with self._lock:
            changed = self._classes.get(pc.name) != pc
            self._classes[pc.name] = pc
        return changed

    def delete(self, name: str) -> bool:
        with self._lock:
            return self._classes.pop(name, None) is not None

    def resolve(self, pod: PodInfo, obj: Mapping[str, Any]) -> PodInfo:
        """*pod* with the priority admission would have written, if *obj* lacks one."""
        spec = _unresolved(obj)
        if spec is None:
            return pod
        name = spec.get("priorityClassName")
        with self._lock:
            pc = self._classes.get(name) if isinstance(name, str) else None
            value = pc.value if pc is not None else convert.default_priority(self._classes)
        return pod if value == pod.priority else dataclasses.replace(pod, priority=value)

    def resolve_group(self, group: NativeGroupInfo) -> NativeGroupInfo:
        """*group* with the priority of its ``priorityClassName`` when admission left
        ``spec.priority`` unset (the Priority plugin fills it in on a default cluster)."""
        policy = group.policy
        if policy.priority is not None:
            return group
        with self._lock:
            pc = self._classes.get(policy.priority_class_name)
            value = pc.value if pc is not None else convert.default_priority(self._classes)
        return dataclasses.replace(group, policy=dataclasses.replace(policy, priority=value))


def cache_informers(client: KubeClient, cache: Cache,
                    label_config: NodeLabelConfig | None = None,
                    warnings: InputWarnings | None = None,
                    scheduler_name: str | None = None) -> list[informer.Informer]:
    """Informers for PriorityClasses, nodes, pods, PodGroups, Jobs, JobSets, and Kubernetes'
    own Workloads and PodGroups feeding *cache* (not started). PriorityClasses come first, so
    that a one-shot read in this order resolves every pod; a running scheduler re-resolves
    the pods without ``spec.priority`` whenever a class changes, so the result never depends
    on which informer delivered first. With *warnings*, a PodGroup, or a pod naming
    *scheduler_name*, that cannot be used gets a warning (other schedulers' pods do not)."""
    classes = PriorityClasses()
    pod_lock = threading.Lock()  # one delivery at a time: the watch's, or a re-resolution's

    def unusable_pod(obj: dict[str, Any], why: str | None) -> None:
        spec = obj.get("spec")
        if (warnings is not None and isinstance(spec, dict)
                and spec.get("schedulerName") == scheduler_name):
            warnings.unusable("Pod", "v1", obj, why)

    to_pod = converting_handler(lambda o: classes.resolve(convert.pod_from_json(o), o),
                                cache.upsert_pod, lambda o: cache.delete_pod(_meta(o, "uid")),
                                unusable_pod if scheduler_name else None)

    def checked(kind: str, api_version: str, handler: informer.Handler) -> informer.Handler:
        """*handler*, with the annotations of what it is handed checked for *warnings*."""
        return handler if warnings is None else warnings.checking(kind, api_version, handler)

    def on_pod(event: informer.EventType, obj: dict[str, Any]) -> None:
        with pod_lock:
            to_pod(event, obj)

    on_node = converting_handler(lambda o: convert.node_from_json(o, label_config),
                                 cache.upsert_node, lambda o: cache.delete_node(_meta(o, "name")))
    on_node, on_pod_shares = hami_feed.with_shares(cache.change_facts, on_node, on_pod)
    pods = informer.Informer(client, informer.PODS, checked("Pod", "v1", on_pod_shares))

    def reresolve(changed: bool) -> None:
        """Convert again the pods whose priority comes from the classes. The informer stores
        an object before delivering it, so any newer version is delivered after this."""
        if not changed:
            return
        with pod_lock:
            for obj in pods.objects():
                if _unresolved(obj) is not None:
                    to_pod(informer.EventType.MODIFIED, obj)

    on_class = converting_handler(
        convert.priority_class_from_json, lambda pc: reresolve(classes.upsert(pc)),
        lambda o: reresolve(classes.delete(_meta(o, "name"))))
    def watch(kind: informer.ResourceKind, handler: informer.Handler) -> informer.Informer:
        return informer.Informer(client, kind, handler)

    return [
        watch(informer.PRIORITY_CLASSES, on_class),
        watch(informer.NODES, on_node),
        pods,
        watch(informer.PODGROUPS, checked(
            "PodGroup", "scheduling.x-k8s.io/v1alpha1", converting_handler(
                convert.podgroup_from_json, cache.upsert_group,
                lambda o: cache.delete_group(informer.object_id(o)),
                None if warnings is None else partial(
                    warnings.unusable, "PodGroup", "scheduling.x-k8s.io/v1alpha1")))),
        watch(informer.JOBS, checked("Job", "batch/v1", converting_handler(
            convert.job_from_json, cache.upsert_job,
            lambda o: cache.delete_job(informer.object_id(o))))),
        watch(informer.JOBSETS, checked("JobSet", "jobset.x-k8s.io/v1alpha2", converting_handler(
            jobset_convert.jobset_from_json, cache.upsert_jobset,
            lambda o: cache.delete_jobset(informer.object_id(o))))),
        *operator_informers(client, cache),
        *native_informers(client, cache, classes),
        *fact_informers(client, cache),
        *device_informers(client, cache),
    ]


def _fact(client: KubeClient, cache: Cache, kind: informer.ResourceKind,
          to_model: Callable[[dict[str, Any]], Any],
          set_: Callable[[ClusterFacts, str, Any], bool], key: Callable[[Any], str],
          raw_key: Callable[[dict[str, Any]], str], namespaces: bool = False,
          on_absent: Callable[[informer.ResourceKind], None] | None = None,
          ) -> informer.Informer:
    """An informer that keeps one table of the cache's ``ClusterFacts`` (*set_* by *key*)."""
    def upsert(value: Any) -> None:
        cache.change_facts(lambda f: set_(f, key(value), value), namespaces=namespaces)

    def delete(obj: dict[str, Any]) -> None:
        cache.change_facts(lambda f: set_(f, raw_key(obj), None), namespaces=namespaces)

    return informer.Informer(client, kind, converting_handler(to_model, upsert, delete),
                             on_absent=on_absent)


def operator_informers(client: KubeClient, cache: Cache) -> list[informer.Informer]:
    """The operators' objects that size their pods' gangs (each CRD optional: absent, it
    has no objects, and pods it would own wait with a reason)."""
    def watch(kind: str, resource: informer.ResourceKind) -> informer.Informer:
        size_of = operator_convert.SIZERS[kind]
        return informer.Informer(client, resource, converting_handler(
            lambda o: operator_convert.operator_job(kind, o, size_of),
            lambda job: _upsert_operator(cache, kind, job),
            lambda o: cache.delete_operator_job(kind, informer.object_id(o))))

    return [watch(kind, resource) for kind, resource in informer.OPERATOR_OBJECTS.items()]


def _upsert_operator(cache: Cache, kind: str, job: JobInfo) -> None:
    """Keep *job*; one whose spec does not read is kept too (its pods wait with why) and
    logged, naming the field."""
    if job.unknown:
        log.warning("operator_object_unreadable", kind=kind, object=job.key, reason=job.unknown)
    cache.upsert_operator_job(kind, job)


def fact_informers(client: KubeClient, cache: Cache) -> list[informer.Informer]:
    """Namespaces (their labels, for namespaceSelector) and the volume objects placement
    reads: claims, PVs, StorageClasses, CSINodes (attach limits)."""
    def fact(kind: informer.ResourceKind, to_model: Callable[[dict[str, Any]], Any],
             set_: Callable[[ClusterFacts, str, Any], bool], key: Callable[[Any], str],
             raw_key: Callable[[dict[str, Any]], str], namespaces: bool = False,
             ) -> informer.Informer:
        return _fact(client, cache, kind, to_model, set_, key, raw_key, namespaces)

    def pair_key(v: tuple[str, Any]) -> str:
        return v[0]

    def name(o: dict[str, Any]) -> str:
        return _meta(o, "name")

    return [
        fact(informer.NAMESPACES, storage.namespace_from_json,
             lambda f, k, v: f.set_namespace(k, None if v is None else v[1]), pair_key, name,
             namespaces=True),
        fact(informer.CLAIMS, storage.claim_from_json, ClusterFacts.set_claim,
             lambda c: c.key, informer.object_id),
        fact(informer.VOLUMES, storage.volume_from_json, ClusterFacts.set_volume,
             lambda v: v.name, name),
        fact(informer.STORAGE_CLASSES, storage.storage_class_from_json, ClusterFacts.set_class,
             lambda c: c.name, name),
        fact(informer.CSINODES, storage.csinode_from_json,
             lambda f, k, v: f.set_limits(k, None if v is None else v[1]), pair_key, name),
    ]


def device_informers(client: KubeClient, cache: Cache) -> list[informer.Informer]:
    """The device objects of Dynamic Resource Allocation (``resource.k8s.io/v1``):
    DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates, into the
    catalog's device inventory.

    Why a warning of its own: each informer says at info that its path is absent, but a
    cluster without the API is one fact an operator should see once, with what it means
    (pods with ``spec.resourceClaims`` wait): one warning for the four kinds, once per
    process."""
    said: list[str] = []  # the kind that said it (informer threads race: under the lock)
    lock = threading.Lock()

    def absent(kind: informer.ResourceKind) -> None:
        with lock:
            if said:
                return
            said.append(kind.name)
        log.warning("api_absent", api=informer.DRA_API, resource=kind.name,
                        effect="no devices: pods with spec.resourceClaims wait")

    def key(kind: informer.ResourceKind) -> Callable[[Any], str]:
        return (lambda v: str(v.key)) if kind.namespaced else (lambda v: str(v.name))

    def name(o: dict[str, Any]) -> str:
        return _meta(o, "name")

    tables: tuple[tuple[informer.ResourceKind, Callable[[dict[str, Any]], Any],
                        Callable[[ClusterFacts, str, Any], bool]], ...] = (
        (informer.DEVICE_CLASSES, devices_convert.device_class, ClusterFacts.set_device_class),
        (informer.RESOURCE_SLICES, slices_convert.resource_slice, ClusterFacts.set_slice),
        (informer.RESOURCE_CLAIMS, devices_convert.resource_claim,
         ClusterFacts.set_resource_claim),
        (informer.CLAIM_TEMPLATES, devices_convert.claim_template,
         ClusterFacts.set_claim_template),
    )
    return [_fact(client, cache, kind, to_model, set_, key(kind),
                  informer.object_id if kind.namespaced else name, on_absent=absent)
            for kind, to_model, set_ in tables]


def native_informers(client: KubeClient, cache: Cache,
                     classes: PriorityClasses) -> list[informer.Informer]:
    """Workloads and ``scheduling.k8s.io`` PodGroups of every served version (1.36 serves
    v1alpha2, 1.37 v1beta1; a version not served is an empty, optional kind)."""
    out: list[informer.Informer] = []
    for workloads, groups in zip(informer.WORKLOADS, informer.NATIVE_PODGROUPS, strict=True):
        version = "scheduling.k8s.io/" + groups.path.split("/")[3]

        def to_workload(o: dict[str, Any], v: str = version) -> WorkloadInfo:
            return native_convert.workload_from_json(o, v)

        def to_group(o: dict[str, Any], v: str = version) -> NativeGroupInfo:
            return classes.resolve_group(native_convert.podgroup_from_json(o, v))

        out.append(informer.Informer(client, workloads, converting_handler(
            to_workload, cache.upsert_workload,
            lambda o: cache.delete_workload(informer.object_id(o)))))
        out.append(informer.Informer(client, groups, converting_handler(
            to_group, cache.upsert_native_group,
            lambda o: cache.delete_native_group(informer.object_id(o)))))
    return out


def wait_for_sync(informers: list[informer.Informer], timeout: float) -> bool:
    """Wait until every informer has delivered its first list (False on timeout)."""
    deadline = time.monotonic() + timeout
    return all(i.wait_for_sync(max(0.0, deadline - time.monotonic())) for i in informers)
