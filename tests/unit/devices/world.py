"""A small DRA world for decision tests, made of the real objects of tests/data/dra: kwok-like
GPU nodes with a ResourceSlice each (the fake driver's, renamed per node), the H100
DeviceClass, and Indexed Jobs whose pods each have a claim made from a template, fed through
the informers' handlers into the cache and decided by ``decide``."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan
from scheduler.feed.cache import ClusterCache
from scheduler.kube.read import feed, informer
from scheduler.kube.read.informer import EventType
from tests.unit.kube.fakes import FakeClient
from tests.unit.policies.builders import SOLVE, nodes, policies, queue

DRA = Path(__file__).parents[2] / "data" / "dra"
NOW = 2_000_000_000.0
NS = "team"


def load(name: str) -> dict[str, Any]:
    return dict(json.loads((DRA / name).read_text()))


H100 = load("deviceclass.json")
CLASS = H100["metadata"]["name"]


def node_slice(node: str, devices: int, clique: str = "") -> dict[str, Any]:
    """The fake driver's real slice, for *node* with its first *devices* GPUs."""
    s = copy.deepcopy(load("resourceslice.json"))
    s["metadata"] = {"name": f"{node}-gpu-example-com", "uid": f"slice-{node}",
                     "resourceVersion": "1"}
    s["spec"]["nodeName"] = node
    s["spec"]["pool"]["name"] = node
    first = s["spec"]["devices"][0]
    s["spec"]["devices"] = []
    for i in range(devices):
        d = copy.deepcopy(first)
        d["name"] = f"gpu-{i}"
        d["attributes"]["index"] = {"int": i}
        d["attributes"]["uuid"] = {"string": f"GPU-{node}-{i}"}
        if clique:
            d["attributes"]["cliqueID"] = {"string": clique}
        s["spec"]["devices"].append(d)
    return s


def template(name: str = "one-h100", count: int = 1) -> dict[str, Any]:
    t = copy.deepcopy(load("resourceclaimtemplate.json"))
    t["metadata"] = {"name": name, "namespace": NS, "uid": f"tmpl-{name}",
                     "resourceVersion": "1"}
    t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = count
    return t


def claim_for(pod: dict[str, Any], tmpl: dict[str, Any]) -> dict[str, Any]:
    """The claim the resourceclaim controller makes for *pod* from *tmpl*."""
    meta = pod["metadata"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{meta['name']}-gpu", "namespace": NS,
                         "uid": f"claim-{meta['name']}", "resourceVersion": "1",
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                                              "controller": True, "name": meta["name"],
                                              "uid": meta["uid"]}]},
            "spec": copy.deepcopy(tmpl["spec"]["spec"])}


def job(name: str, pods: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "uid": f"job-{name}",
                         "resourceVersion": "1", "creationTimestamp": "2033-05-18T03:00:00Z"},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                     "template": {"spec": {"schedulerName": "gang-scheduler"}}},
            "status": {}}


def job_pod(job_name: str, index: int, tmpl: str = "one-h100",
            made: bool = True) -> dict[str, Any]:
    """A pending pod of the Job, its claim from *tmpl* made (named in its status) or not."""
    pod = copy.deepcopy(load("pod-with-claim.json"))
    name = f"{job_name}-{index}"
    pod["metadata"] = {"name": name, "namespace": NS, "uid": f"uid-{name}",
                       "resourceVersion": "1", "creationTimestamp": "2033-05-18T03:00:00Z",
                       "labels": {"batch.kubernetes.io/job-completion-index": str(index)},
                       "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                       "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                            "controller": True, "name": job_name,
                                            "uid": f"job-{job_name}"}]}
    spec = pod["spec"]
    spec["schedulerName"] = "gang-scheduler"
    for key in ("nodeName", "schedulingGroup", "nodeSelector"):
        spec.pop(key, None)
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": tmpl}]
    pod["status"] = {"phase": "Pending"}
    if made:
        pod["status"]["resourceClaimStatuses"] = [{"name": "gpu",
                                                   "resourceClaimName": f"{name}-gpu"}]
    return pod


@dataclass
class World:
    """The cache fed through the real handlers; ``decide`` over what it holds."""

    nodes: int = 2
    devices: int = 8
    #: The nodes' ``nvidia.com/gpu`` allocatable (0: GPUs only as devices, as on a node whose
    #: GPUs a DRA driver publishes instead of a device plugin).
    gpus: int = 8
    cache: ClusterCache = field(default_factory=ClusterCache)
    handlers: dict[informer.ResourceKind, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.handlers = {i.kind: i.handler for i in feed.cache_informers(
            FakeClient(), self.cache)}  # type: ignore[arg-type]
        for node in nodes("h100", self.nodes, gpus=self.gpus):
            self.cache.upsert_node(node)
            if self.devices:
                self.add(informer.RESOURCE_SLICES, node_slice(node.name, self.devices))
        self.add(informer.DEVICE_CLASSES, H100)

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in nodes("h100", self.nodes)]

    def add(self, kind: informer.ResourceKind, obj: dict[str, Any]) -> None:
        self.handlers[kind](EventType.ADDED, obj)

    def job(self, name: str, pods: int, devices_each: int = 1, made: bool = True) -> None:
        """An Indexed Job of *pods* pods, each claiming *devices_each* GPUs."""
        tmpl = template(f"{name}-gpus", devices_each)
        self.add(informer.CLAIM_TEMPLATES, tmpl)
        self.add(informer.JOBS, job(name, pods))
        for i in range(pods):
            pod = job_pod(name, i, tmpl["metadata"]["name"], made)
            if made:
                self.add(informer.RESOURCE_CLAIMS, claim_for(pod, tmpl))
            self.add(informer.PODS, pod)

    def decide(self, quota: int = 1024) -> CyclePlan:
        """The cycle's plan, the default queue given *quota* GPUs in the nodes' pool."""
        inp = self.cache.cycle_input(NOW)
        return decide(inp.snapshot, inp.gangs.pending,
                      policies(queue("default", quota={"h100": quota})), NOW, None,
                      solver=SOLVE)
