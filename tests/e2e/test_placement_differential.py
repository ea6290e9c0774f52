"""Differential test: the pure placement core and the real kube-scheduler agree on which nodes
a pod may go to, for generated pods and node sets on one apiserver.

Each hypothesis example is a batch: a few nodes (zones, taints, cordons, GPU models, small pod
limits), pods already running on them (labels, required anti-affinity, host ports), and
trial pods with node selectors and affinity, tolerations, inter-pod affinity and
anti-affinity (namespaces and namespaceSelector), topology spread (maxSkew, minDomains,
nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys, ScheduleAnyway), host ports and
resources; the volume batch adds claims bound to zonal PVs, WaitForFirstConsumer claims
with static PVs, and missing claims. kube-scheduler's feasible set (``differential``) must
equal the core's for every trial pod. Known differences are listed in the README
("Known differences from kube-scheduler"); none is generated here.

The cluster is this module's own (nothing else runs on it), and batches accumulate: later
trials also see earlier batches' nodes and pods, as both schedulers do.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kubernetes import client

from scheduler.tools.devcluster import nodes, rest
from scheduler.tools.devcluster.cluster import DevCluster
from tests.e2e.cluster_api import wait_for
from tests.e2e.differential import (
    PROFILE,
    FeasibleSets,
    core_feasible,
    kube_feasible,
    unschedulable,
)

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
BATCH = "diff-batch"
APPS = ("web", "db", "trainer")
TRIALS_PER_BATCH = 25
_batches = itertools.count()


class World:
    def __init__(self, cluster: DevCluster, sets: FeasibleSets) -> None:
        self.cluster, self.sets = cluster, sets
        self.api = cluster.api_client()
        self.core = client.CoreV1Api(self.api)
        self.storage = client.StorageV1Api(self.api)
        self.namespaces: dict[str, str] = {}
        for team in ("a", "b"):
            name = f"diff-{team}-{uuid.uuid4().hex[:6]}"
            rest.call(self.core.create_namespace,
                      {"metadata": {"name": name, "labels": {"team": team}}})
            wait_for(partial(rest.exists, self.core.read_namespaced_service_account, "default",
                             name), 60, what=f"{name}/default")
            self.namespaces[team] = name


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from tests.e2e.conftest import SKIP_REASON, e2e_disabled

    if e2e_disabled():
        pytest.skip(SKIP_REASON)
    work = tmp_path_factory.mktemp("differential")
    cluster = DevCluster(work / "cluster", owned=True)
    cluster.up(log=lambda line: print(f"[differential] {line}"))
    sets = FeasibleSets(cluster, work)
    try:
        yield World(cluster, sets)
    finally:
        sets.stop()
        cluster.down(log=lambda line: print(f"[differential] {line}"))


# Strategies ----------------------------------------------------------------------------------
def _selector(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return {"matchExpressions": [{"key": "app", "operator": "In",
                                      "values": sorted(set(draw(st.lists(
                                          st.sampled_from(APPS), min_size=1, max_size=2))))}]}
    if kind == 1:
        return {"matchExpressions": [{"key": "app", "operator": draw(st.sampled_from(
            ("Exists", "DoesNotExist")))}]}
    return {"matchLabels": {"app": draw(st.sampled_from(APPS))}}


def _term(draw: st.DrawFn, world: World) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": _selector(draw),
                            "topologyKey": draw(st.sampled_from((ZONE, HOST)))}
    scope = draw(st.integers(0, 4))
    if scope == 1:
        term["namespaces"] = [world.namespaces[draw(st.sampled_from("ab"))]]
    elif scope == 2:
        term["namespaceSelector"] = {"matchLabels": {"team": draw(st.sampled_from("ab"))}}
    elif scope == 3:
        term["namespaceSelector"] = {}
    return term


@st.composite
def node_set(draw: st.DrawFn, batch: int) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(3, 6))):
        labels = {HOST: f"b{batch}-n{i}", BATCH: str(batch),
                  "gpu": draw(st.sampled_from(("a100", "h100")))}
        if draw(st.integers(0, 6)):
            labels[ZONE] = draw(st.sampled_from(("za", "zb", "zc")))
        taint = draw(st.sampled_from((None, None, None, ("dedicated", "x", "NoSchedule"),
                                      ("soft", "", "PreferNoSchedule"))))
        out.append({
            "name": f"b{batch}-n{i}", "labels": labels,
            "allocatable": {"cpu": draw(st.sampled_from(("2", "8"))), "memory": "16Gi",
                            "pods": draw(st.sampled_from(("3", "110"))),
                            "ephemeral-storage": "100Gi",
                            "nvidia.com/gpu": draw(st.sampled_from(("0", "4", "8")))},
            "taints": [{"key": k, "value": v, "effect": e} for k, v, e in [taint]] if taint
            else [],
            "unschedulable": draw(st.integers(0, 9)) == 0,
        })
    return out


def _container(draw: st.DrawFn, port: bool) -> dict[str, Any]:
    gpu = draw(st.sampled_from((0, 0, 1, 4)))
    resources: dict[str, Any] = {"requests": {"cpu": draw(st.sampled_from(
        ("100m", "500m", "1500m")))}}
    if gpu:
        resources["limits"] = {"nvidia.com/gpu": str(gpu)}
    container: dict[str, Any] = {"name": "main", "image": "registry.invalid/x",
                                 "resources": resources}
    if port:
        container["ports"] = [{"containerPort": 80, "hostPort": draw(st.sampled_from(
            (8080, 9090)))}]
    return container


@st.composite
def existing_pod(draw: st.DrawFn, world: World, node_names: list[str]) -> dict[str, Any]:
    team = draw(st.sampled_from("ab"))
    spec: dict[str, Any] = {"nodeName": draw(st.sampled_from(node_names)),
                            "terminationGracePeriodSeconds": 0,
                            "containers": [_container(draw, draw(st.integers(0, 4)) == 0)]}
    if draw(st.integers(0, 3)) == 0:
        spec["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(draw, world)]}}
    return {"metadata": {"name": f"e-{uuid.uuid4().hex[:8]}",
                         "namespace": world.namespaces[team],
                         "labels": {"app": draw(st.sampled_from(APPS)), "team": team}},
            "spec": spec}


@st.composite
def trial_pod(draw: st.DrawFn, world: World, batch: int, node_names: list[str],
              claims: tuple[str, ...] = ()) -> dict[str, Any]:
    team = "a" if claims else draw(st.sampled_from("ab"))
    # Priority 0 like every running pod here: kube-scheduler's preemption finds no victim.
    spec: dict[str, Any] = {"schedulerName": PROFILE, "terminationGracePeriodSeconds": 0,
                            "containers": [_container(draw, draw(st.integers(0, 6)) == 0)]}
    if draw(st.integers(0, 4)):
        spec["nodeSelector"] = {BATCH: str(batch)}
    if draw(st.integers(0, 5)) == 0:
        spec.setdefault("nodeSelector", {})["gpu"] = "a100"
    affinity: dict[str, Any] = {}
    if draw(st.integers(0, 4)) == 0:
        term = ({"matchFields": [{"key": "metadata.name", "operator": "In",
                                  "values": [draw(st.sampled_from(node_names))]}]}
                if draw(st.booleans()) else
                {"matchExpressions": [{"key": ZONE, "operator": draw(st.sampled_from(
                    ("In", "NotIn"))), "values": ["za", "zb"]}]})
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term]}}
    for kind in ("podAffinity", "podAntiAffinity"):
        block: dict[str, Any] = {}
        if draw(st.integers(0, 3)) == 0:
            block["requiredDuringSchedulingIgnoredDuringExecution"] = [
                _term(draw, world) for _ in range(draw(st.integers(1, 2)))]
        if draw(st.integers(0, 5)) == 0:
            block["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": 10, "podAffinityTerm": _term(draw, world)}]
        if block:
            affinity[kind] = block
    if affinity:
        spec["affinity"] = affinity
    if draw(st.integers(0, 2)) == 0:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    if draw(st.integers(0, 9)) == 0:
        spec.setdefault("tolerations", []).append(
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
             "effect": "NoSchedule"})
    if draw(st.integers(0, 2)) == 0:
        spread: dict[str, Any] = {
            "maxSkew": draw(st.integers(1, 2)),
            "topologyKey": draw(st.sampled_from((ZONE, HOST))),
            "whenUnsatisfiable": draw(st.sampled_from(
                ("DoNotSchedule", "DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"))),
            "labelSelector": _selector(draw)}
        if spread["whenUnsatisfiable"] == "DoNotSchedule" and draw(st.integers(0, 2)) == 0:
            spread["minDomains"] = draw(st.integers(2, 4))
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if draw(st.integers(0, 2)) == 0:
                spread[policy] = draw(st.sampled_from(("Honor", "Ignore")))
        if draw(st.integers(0, 3)) == 0:
            spread["matchLabelKeys"] = ["team"]
        spec["topologySpreadConstraints"] = [spread]
    if claims:
        mounted = sorted(set(draw(st.lists(st.sampled_from(claims), min_size=1, max_size=2))))
        spec["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                           for i, c in enumerate(mounted)]
    return {"metadata": {"name": f"t-{uuid.uuid4().hex[:8]}", "namespace": world.namespaces[team],
                         "labels": {"app": draw(st.sampled_from(APPS)), "team": team}},
            "spec": spec}


# Running a batch -----------------------------------------------------------------------------
def _create_nodes(world: World, specs: list[dict[str, Any]]) -> None:
    for index, n in enumerate(specs):
        nodes.create_node(world.api, n["name"], n["labels"], n["allocatable"], n["taints"],
                          index)
        if n["unschedulable"]:
            rest.call(world.core.patch_node, n["name"], {"spec": {"unschedulable": True}},
                      _content_type=rest.MERGE_PATCH)


def _create_pod(world: World, body: dict[str, Any]) -> dict[str, Any]:
    return rest.call(world.core.create_namespaced_pod, body["metadata"]["namespace"], body)


def _read(world: World, pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    return rest.call(world.core.read_namespaced_pod, meta["name"], meta["namespace"])


def _settled(world: World, pod: dict[str, Any]) -> bool:
    """The fake kubelet ran or refused the pod (its phase is final for this test)."""
    return (_read(world, pod).get("status") or {}).get("phase") in ("Running", "Failed")


def _answered(world: World, pod: dict[str, Any]) -> dict[str, Any]:
    """The pod once kube-scheduler has answered for it."""
    wait_for(partial(lambda p: unschedulable(_read(world, p)), pod), 120,
             what=f"kube-scheduler's answer for {pod['metadata']['name']}")
    return _read(world, pod)


def compare(world: World, trials: list[dict[str, Any]],
            sizes: list[int] | None = None) -> list[str]:
    """Create the trial pods, read both answers, delete them; the disagreements (and each
    feasible set's size in *sizes*)."""
    created = [_create_pod(world, t) for t in trials]
    answered = [_answered(world, pod) for pod in created]
    core = core_feasible(world.cluster.kubeconfig, answered)
    problems = []
    for pod in answered:
        kube = kube_feasible(world.sets, pod)
        mine = core[pod["metadata"]["uid"]]
        if sizes is not None:
            sizes.append(len(kube))
        if kube != mine:
            problems.append(f"{pod['metadata']['name']}: kube-scheduler {sorted(kube)}, core "
                            f"{sorted(mine)}; spec {pod['spec']}")
    for pod in created:
        try:
            rest.code_of(world.core.delete_namespaced_pod, pod["metadata"]["name"],
                           pod["metadata"]["namespace"], grace_period_seconds=0)
        except client.ApiException as exc:
            if exc.status != 404:  # already gone is what deleting is for
                raise
    return problems


@st.composite
def batch(draw: st.DrawFn, world: World) -> tuple[int, list[dict[str, Any]],
                                                  list[dict[str, Any]], list[dict[str, Any]]]:
    k = next(_batches)
    node_specs = draw(node_set(k))
    names = [n["name"] for n in node_specs]
    existing = [draw(existing_pod(world, names)) for _ in range(draw(st.integers(0, 5)))]
    trials = [draw(trial_pod(world, k, names)) for _ in range(TRIALS_PER_BATCH)]
    return k, node_specs, existing, trials


# Volumes -------------------------------------------------------------------------------------
CLASSES: tuple[dict[str, Any], ...] = (
    # Immediate: claims are bound by kube-controller-manager's PV binder before any pod.
    {"metadata": {"name": "diff-immediate"}, "provisioner": "kubernetes.io/no-provisioner",
     "volumeBindingMode": "Immediate"},
    # WaitForFirstConsumer, static PVs only.
    {"metadata": {"name": "diff-static"}, "provisioner": "kubernetes.io/no-provisioner",
     "volumeBindingMode": "WaitForFirstConsumer"},
    # WaitForFirstConsumer with a provisioner, limited to two zones.
    {"metadata": {"name": "diff-dynamic"}, "provisioner": "diff.example.com/none",
     "volumeBindingMode": "WaitForFirstConsumer",
     "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["za", "zb"]}]}]},
)


def _pv(name: str, cls: str, size: str, modes: list[str], where: tuple[str, str],
        claim: tuple[str, str] | None = None, zone_label: str | None = None) -> dict[str, Any]:
    key, value = where
    spec: dict[str, Any] = {
        "capacity": {"storage": size}, "accessModes": modes, "storageClassName": cls,
        "persistentVolumeReclaimPolicy": "Retain", "local": {"path": f"/mnt/{name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": [value]}]}]}}}
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    labels = {ZONE: zone_label} if zone_label else {}
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def _claim(namespace: str, name: str, cls: str, size: str, modes: list[str],
           volume: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": cls, "accessModes": modes,
                            "resources": {"requests": {"storage": size}}}
    if volume:
        spec["volumeName"] = volume
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


@st.composite
def volume_batch(draw: st.DrawFn, world: World) -> tuple[
        list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(nodes, PVs, claims, trial pods): zonal PVs bound to claims, static PVs on one node
    or zone for WaitForFirstConsumer claims, a provisioned class, and a missing claim."""
    k = next(_batches)
    node_specs = draw(node_set(k))
    names = [n["name"] for n in node_specs]
    ns = world.namespaces["a"]
    pvs, claims = [], []
    for j in range(draw(st.integers(1, 2))):
        zone = draw(st.sampled_from(("za", "zb")))
        pvs.append(_pv(f"b{k}-bound-{j}", "diff-immediate", "2Gi", ["ReadWriteOnce"],
                       (ZONE, zone), (ns, f"b{k}-bound-{j}"),
                       zone if draw(st.booleans()) else None))
        claims.append(_claim(ns, f"b{k}-bound-{j}", "diff-immediate", "1Gi", ["ReadWriteOnce"],
                             f"b{k}-bound-{j}"))
    for j in range(draw(st.integers(1, 4))):
        where = ((HOST, draw(st.sampled_from(names))) if draw(st.booleans())
                 else (ZONE, draw(st.sampled_from(("za", "zb", "zc")))))
        modes = draw(st.sampled_from((["ReadWriteOnce"], ["ReadWriteOnce", "ReadOnlyMany"])))
        pvs.append(_pv(f"b{k}-static-{j}", "diff-static", draw(st.sampled_from(("1Gi", "5Gi"))),
                       modes, where))
    for j in range(draw(st.integers(1, 3))):
        claims.append(_claim(ns, f"b{k}-wait-{j}", "diff-static",
                             draw(st.sampled_from(("1Gi", "3Gi"))),
                             draw(st.sampled_from((["ReadWriteOnce"], ["ReadOnlyMany"])))))
    claims.append(_claim(ns, f"b{k}-dynamic", "diff-dynamic", "1Gi", ["ReadWriteOnce"]))
    names_of = (*(str(c["metadata"]["name"]) for c in claims), f"b{k}-missing")
    trials = [draw(trial_pod(world, k, names, names_of)) for _ in range(TRIALS_PER_BATCH)]
    return node_specs, pvs, claims, trials


def _bound(world: World, claim: dict[str, Any]) -> bool:
    meta = claim["metadata"]
    cur = rest.call(world.core.read_namespaced_persistent_volume_claim, meta["name"],
                    meta["namespace"])
    return (cur.get("status") or {}).get("phase") == "Bound"


def test_with_volumes_the_core_and_kube_scheduler_agree(world: World) -> None:
    for cls in CLASSES:
        if not rest.exists(world.storage.read_storage_class, cls["metadata"]["name"]):
            rest.call(world.storage.create_storage_class, cls)
    seen: list[int] = []

    @settings(max_examples=4, deadline=None, phases=[Phase.generate], database=None,
              suppress_health_check=list(HealthCheck))
    @given(volume_batch(world))
    def run(case: tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]],
                        list[dict[str, Any]]]) -> None:
        node_specs, pvs, claims, trials = case
        _create_nodes(world, node_specs)
        for pv in pvs:
            rest.call(world.core.create_persistent_volume, pv)
        for claim in claims:
            rest.call(world.core.create_namespaced_persistent_volume_claim,
                      claim["metadata"]["namespace"], claim)
        for claim in claims:
            if claim["spec"].get("volumeName"):
                wait_for(partial(_bound, world, claim), 60, what="a pre-bound claim bound")
        problems = compare(world, trials, seen)
        assert not problems, "\n".join(problems)

    run()
    empty = sum(1 for n in seen if not n)
    print(f"differential with volumes: {len(seen)} trial pods agreed ({empty} placeable "
          "nowhere)")
    assert len(seen) >= 4 * TRIALS_PER_BATCH and 0 < empty < len(seen)


def test_the_core_and_kube_scheduler_agree_on_feasible_nodes(world: World) -> None:
    seen: list[int] = []

    @settings(max_examples=8, deadline=None, phases=[Phase.generate], database=None,
              suppress_health_check=list(HealthCheck))
    @given(batch(world))
    def run(case: tuple[int, list[dict[str, Any]], list[dict[str, Any]],
                        list[dict[str, Any]]]) -> None:
        _, node_specs, existing, trials = case
        _create_nodes(world, node_specs)
        running = [_create_pod(world, body) for body in existing]
        for pod in running:
            wait_for(partial(_settled, world, pod), 60, what="an existing pod to settle")
        problems = compare(world, trials, seen)
        assert not problems, "\n".join(problems)

    started = time.monotonic()
    run()
    empty = sum(1 for n in seen if not n)
    print(f"differential: {len(seen)} trial pods agreed ({empty} placeable nowhere, the rest "
          f"on {sum(seen) / max(len(seen) - empty, 1):.1f} nodes on average; "
          f"{time.monotonic() - started:.0f}s)")
    # Not vacuous: both outcomes occur, and sets of several nodes.
    assert len(seen) >= 8 * TRIALS_PER_BATCH and 0 < empty < len(seen) and max(seen) > 1
