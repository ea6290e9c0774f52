"""The ``examples/`` on a real control plane with the scheduler installed from deploy/.

- the Indexed Job: ``kubectl apply``, and the real Job controller creates its pods;
- the DRA Job: the same, with a claim per pod the real resourceclaim controller makes from
  a template, allocated by gang-scheduler on the dev cluster's fake driver's devices;
- the PodGroup with launcher and workers: applied as is;
- the Trainer runtime: ``kubectl apply``, and the real Kubeflow Trainer and JobSet make its
  PodGroup and pods.

Each gang must bind whole. Setup: module fixture ``deployed`` (tests/e2e/test_deploy_support.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import native_support
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


# Devices (Dynamic Resource Allocation) ----------------------------------------------------------
def test_dra_job_gets_every_worker_its_device_and_binds_whole(env: Deployed) -> None:
    """``kubectl apply`` of the DRA example: the resourceclaim controller makes a claim per
    pod from the template, gang-scheduler allocates the four (one device each, of the node
    its pod binds to, reserved for it) and binds the Job whole."""
    env.kubectl("apply", "-f", str(EXAMPLES / "dra-indexed-job.yaml"))
    selector = "batch.kubernetes.io/job-name=dra-train"
    nodes = wait_whole(env, "team-a", selector, 4)
    claims = kubectl_json(env.admin, "-n", "team-a", "get", "resourceclaims")["items"]
    mine = {c["metadata"]["ownerReferences"][0]["name"]: c for c in claims
            if c["metadata"]["ownerReferences"][0]["name"] in nodes}
    assert sorted(mine) == sorted(nodes)
    devices = set()
    for pod, claim in mine.items():
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == nodes[pod], (pod, result)
        assert [r["name"] for r in claim["status"]["reservedFor"]] == [pod]
        devices.add((result["pool"], result["device"]))
    assert len(devices) == 4


# The PodGroup with two roles ------------------------------------------------------------------
def test_podgroup_with_launcher_and_workers_binds_whole(env: Deployed) -> None:
    env.kubectl("apply", "-f", str(EXAMPLES / "podgroup-launcher-workers.yaml"))
    nodes = wait_whole(env, "team-b", f"{GROUP_LABEL}=mpi-train", 5)
    workers = {n: node for n, node in nodes.items() if "worker" in n}
    assert len(set(workers.values())) == 4, "8-GPU workers need a node each"

    def group_status() -> dict[str, Any]:
        group = kubectl_json(env.admin, "-n", "team-b", "get", "podgroups.scheduling.x-k8s.io",
                             "mpi-train")
        status = group.get("status") or {}
        return status if status.get("scheduled") == 5 else {}

    status = wait_for(group_status, 30, what="PodGroup status scheduled=5")
    assert status["phase"] in ("Scheduled", "Running")


# Kubernetes' own gang API -------------------------------------------------------------------
def test_workload_and_podgroup_example_binds_whole_in_one_rack(env: Deployed) -> None:
    """The upstream-API example of the release the dev cluster runs (v1alpha2 on 1.36,
    v1beta1 on 1.37), applied as is: 4 workers bound whole within one rack (its required
    topology), the PodGroup's scheduling condition True, written by the installed scheduler."""
    name = {"v1alpha2": "workload-podgroup.yaml",
            "v1beta1": "workload-podgroup-v1beta1.yaml"}[native_support.VERSION]
    env.kubectl("apply", "-f", str(EXAMPLES / name))
    nodes = wait_whole(env, "team-b", "app.kubernetes.io/name=llm-pretrain", 4)
    racks = {kubectl_json(env.admin, "get", "node", node)["metadata"]["labels"][
        "topology.gangscheduler.io/rack"] for node in set(nodes.values())}
    assert len(racks) == 1, f"one rack required, got {racks}"

    def scheduled() -> dict[str, Any]:
        group = kubectl_json(env.admin, "-n", "team-b", "get", "podgroups.scheduling.k8s.io",
                             "llm-pretrain-workers")
        found = native_support.condition(group, native_support.SCHEDULED)
        return found if found.get("status") == "True" else {}

    assert wait_for(scheduled, 30, what="PodGroup scheduled")["reason"] == "Scheduled"


# The Kubeflow Trainer runtime -----------------------------------------------------------------
def apply_until_trainer_sees_its_runtime(env: Deployed, path: Path) -> None:
    """``kubectl apply`` a file with a TrainingRuntime and a TrainJob that uses it, again
    while Trainer's webhook refuses the TrainJob because the runtime "must be created before".

    The webhook looks the runtime up in its own informer cache, which on a loaded machine has
    not yet seen the runtime created a few milliseconds earlier in the same apply (a known
    upstream race, kubeflow/trainer#2807). Applying again is what the example tells its users
    to do; any other failure fails at once.
    """
    def applied() -> bool:
        proc = env.kubectl("apply", "-f", str(path), check=False)
        if proc.returncode == 0:
            return True
        assert "must be created before the TrainJob" in proc.stderr, proc.stderr
        return False

    wait_for(applied, 30, interval_s=0.5, what="Trainer's webhook to see the example's runtime")


def test_trainer_gang_binds_whole_in_its_team_queue(env: Deployed) -> None:
    """``kubectl apply`` of the example; the real Trainer makes its PodGroup and, through
    JobSet, its 4 pods, which bind whole in queue team-b."""
    if not env.cluster_operators:
        pytest.skip("the dev cluster runs without the training operators")
    apply_until_trainer_sees_its_runtime(env, EXAMPLES / "trainer-runtime-coscheduling.yaml")
    trainjob = kubectl_json(env.admin, "-n", "team-b", "get", "trainjob", "llm-finetune")
    # Named in full: the Job controller (WorkloadWithJob) gives each of the JobSet's Indexed
    # Jobs a scheduling.k8s.io PodGroup too, and plain "podgroups" may mean either kind.
    group = wait_for(lambda: kubectl_json(env.admin, "-n", "team-b", "get",
                                          "podgroups.scheduling.x-k8s.io")["items"],
                     60, what="Trainer's PodGroup")[0]
    assert group["metadata"]["name"] == "llm-finetune"
    assert group["spec"]["minMember"] == 4, group["spec"]
    assert group["metadata"]["ownerReferences"][0]["uid"] == trainjob["metadata"]["uid"]
    nodes = wait_whole(env, "team-b", f"{GROUP_LABEL}=llm-finetune", 4)
    assert len(set(nodes.values())) == 4, "8-GPU pods need a node each"
    pods = pods_of(env, "team-b", f"{GROUP_LABEL}=llm-finetune").values()
    # The runtime's pod template names queue team-b, whose quota covers the 32 GPUs (the
    # default queue, with no h100 and 8 a100 GPUs, never could).
    assert all(p["metadata"]["labels"]["gangscheduler.io/queue"] == "team-b" for p in pods)
    assert all(p["spec"]["schedulerName"] == "gang-scheduler" for p in pods)
