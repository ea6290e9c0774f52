"""The three ``examples/`` on a real control plane with the scheduler installed from deploy/.

- the Indexed Job: ``kubectl apply``, and the real Job controller creates its pods;
- the PodGroup with launcher and workers: applied as is;
- the Trainer runtime: there is no Kubeflow Trainer controller here yet, so the test creates
  what Trainer would from the example (the PodGroup named after the TrainJob, minMember =
  numNodes, minResources = the summed requests, scheduleTimeoutSeconds from the runtime, and
  the pods from the runtime's pod template with the TrainJob's per-node resources, labelled
  with the PodGroup).

Each gang must bind whole. Setup: module fixture ``deployed`` (tests/e2e/test_deploy_support.py).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes.utils import parse_quantity

from tests.e2e.cluster_api import wait_for
from tests.e2e.test_deploy_support import (
    REPO,
    Deployed,
    deployed,  # noqa: F401  (module fixture)
    kubectl_json,
)

pytestmark = pytest.mark.e2e

EXAMPLES = REPO / "examples"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@pytest.fixture
def env(deployed: Deployed) -> Iterator[Deployed]:  # noqa: F811
    """The installed cluster, with the examples' workloads removed after each test."""
    yield deployed
    deployed.delete_workloads("team-a", "team-b")


def pods_of(env: Deployed, ns: str, selector: str) -> dict[str, dict[str, Any]]:
    items = kubectl_json(env.admin, "-n", ns, "get", "pods", "-l", selector)["items"]
    return {p["metadata"]["name"]: p for p in items}


def bound(pods: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {n: p["spec"]["nodeName"] for n, p in pods.items() if p["spec"].get("nodeName")}


def wait_whole(env: Deployed, ns: str, selector: str, size: int) -> dict[str, str]:
    """Wait until all `size` pods are bound. A poll may see some bound while the binder is
    still at it (members bind in parallel, not in one API call); a gang left partly bound
    fails the wait, which then names what was bound."""
    seen: dict[str, str] = {}

    def check() -> dict[str, str]:
        seen.clear()
        seen.update(bound(pods_of(env, ns, selector)))
        return dict(seen) if len(seen) == size else {}

    try:
        return wait_for(check, 60, 0.1, what=f"{size} pods of {selector} bound")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; bound at the end: {seen or 'none'}") from None


# The Indexed Job ------------------------------------------------------------------------------
def test_indexed_job_is_one_gang_of_its_parallelism(env: Deployed) -> None:
    """``kubectl apply`` of the example; the real Job controller makes its 4 ranks, which bind
    whole."""
    env.kubectl("apply", "-f", str(EXAMPLES / "pytorch-ddp-indexed-job.yaml"))
    job = kubectl_json(env.admin, "-n", "team-a", "get", "job", "ddp-train")
    assert job["spec"]["parallelism"] == 4
    selector = "batch.kubernetes.io/job-name=ddp-train"
    nodes = wait_whole(env, "team-a", selector, 4)
    assert all(node.startswith(("a100-", "h100-")) for node in nodes.values())
    pods = pods_of(env, "team-a", selector).values()
    for pod in pods:
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", "ddp-train", True)
        assert owner["uid"] == job["metadata"]["uid"]
    ranks = sorted(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
                   for p in pods)
    assert ranks == ["0", "1", "2", "3"]


# The PodGroup with two roles ------------------------------------------------------------------
def test_podgroup_with_launcher_and_workers_binds_whole(env: Deployed) -> None:
    env.kubectl("apply", "-f", str(EXAMPLES / "podgroup-launcher-workers.yaml"))
    nodes = wait_whole(env, "team-b", f"{GROUP_LABEL}=mpi-train", 5)
    workers = {n: node for n, node in nodes.items() if "worker" in n}
    assert len(set(workers.values())) == 4, "8-GPU workers need a node each"

    def group_status() -> dict[str, Any]:
        group = kubectl_json(env.admin, "-n", "team-b", "get", "podgroup", "mpi-train")
        status = group.get("status") or {}
        return status if status.get("scheduled") == 5 else {}

    status = wait_for(group_status, 30, what="PodGroup status scheduled=5")
    assert status["phase"] in ("Scheduled", "Running")


# The Kubeflow Trainer runtime -----------------------------------------------------------------
def trainer_objects(path: str = "trainer-runtime-coscheduling.yaml") -> list[dict[str, Any]]:
    """What Kubeflow Trainer creates from the example's TrainJob with its runtime (plus the
    example's Namespace)."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / path).read_text()) if d]
    runtime = next(d for d in docs if d["kind"] == "TrainingRuntime")
    trainjob = next(d for d in docs if d["kind"] == "TrainJob")
    name, ns = trainjob["metadata"]["name"], trainjob["metadata"]["namespace"]
    nodes = trainjob["spec"]["trainer"]["numNodes"]
    resources = trainjob["spec"]["trainer"]["resourcesPerNode"]
    timeout = runtime["spec"]["podGroupPolicy"]["coscheduling"]["scheduleTimeoutSeconds"]
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    pod_template = job["template"]["spec"]["template"]
    pod_spec = pod_template["spec"]
    total = {r: str(parse_quantity(v) * nodes) for r, v in resources["requests"].items()}
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": ns},
             "spec": {"minMember": nodes, "scheduleTimeoutSeconds": timeout,
                      "minResources": total}}
    pods = []
    for i in range(nodes):
        spec = copy.deepcopy(pod_spec)
        spec["restartPolicy"] = "Never"
        for c in spec["containers"]:
            c["resources"] = copy.deepcopy(resources)
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"{name}-{job['name']}-0-{i}", "namespace": ns,
            "labels": {**pod_template["metadata"]["labels"], GROUP_LABEL: name,
                       "jobset.sigs.k8s.io/jobset-name": name,
                       "jobset.sigs.k8s.io/replicatedjob-name": job["name"]}}, "spec": spec})
    namespaces = [d for d in docs if d["kind"] == "Namespace"]
    return [*namespaces, group, *pods]


def test_trainer_gang_binds_whole_in_its_team_queue(env: Deployed) -> None:
    objects = trainer_objects()
    group = next(o for o in objects if o["kind"] == "PodGroup")
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert group["spec"]["minMember"] == 4 and len(pods) == 4
    assert all(p["spec"]["schedulerName"] == "gang-scheduler" for p in pods)
    # The runtime's pod template names queue team-b, whose quota holds the 32 GPUs (the
    # default queue, with no h100 and 8 a100 GPUs, never could).
    assert all(p["metadata"]["labels"]["gangscheduler.io/queue"] == "team-b" for p in pods)
    env.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                      "items": objects}))
    nodes = wait_whole(env, "team-b", f"{GROUP_LABEL}=llm-finetune", 4)
    assert len(set(nodes.values())) == 4, "8-GPU pods need a node each"
