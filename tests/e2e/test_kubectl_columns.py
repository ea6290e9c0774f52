"""What ``kubectl get`` shows: a PodGroup's queue and reason, and a Queue whose quota the
cluster cannot honour (a pool no node carries), each a column on the real apiserver with the
real kubectl, written by a live scheduler."""

from __future__ import annotations

import subprocess

import pytest

from scheduler.tools.devcluster import build, rest
from tests.e2e.cluster_api import PODGROUP_GROUP, PODGROUP_PLURAL, PODGROUP_VERSION, wait_for
from tests.e2e.live import GPU, QUEUES, InProcessScheduler, Tenant

pytestmark = pytest.mark.e2e


def kubectl_table(tenant: Tenant, *args: str) -> list[dict[str, str]]:
    """``kubectl get`` as a person reads it: one dict per row, keyed by the column headers."""
    out = subprocess.run([str(build.kubectl_path()), "--kubeconfig", str(tenant.cp.kubeconfig),
                          "get", *args], capture_output=True, text=True, check=True,
                         timeout=60).stdout.splitlines()
    header = out[0]
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    names = [header[a:b].strip() for a, b in bounds]
    return [{n: line[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)}
            for line in out[1:]]


def test_kubectl_get_podgroups_shows_queue_and_reason(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tenant.create_nodes(1, gpus=8)
    tenant.create_gang("fits", 2, gpus=4)
    tenant.create_gang("waits", 2, gpus=8)  # 16 GPUs on one 8-GPU node: never fits

    def rows() -> dict[str, dict[str, str]]:
        table = {r["NAME"]: r for r in kubectl_table(tenant, "podgroups.scheduling.x-k8s.io",
                                                     "-n", tenant.namespace)}
        return table if all(r.get("REASON") for r in table.values()) and len(table) == 2 else {}

    table = wait_for(rows, 60, what="both PodGroups with a reason")
    assert {r["QUEUE"] for r in table.values()} == {tenant.queue}, table
    # The reason category, not kube-scheduler's catch-all "Unschedulable" (issue 32): the
    # 16 GPUs it needs exceed the one 8-GPU node, whatever the queue allows.
    assert table["waits"]["PHASE"] == "Pending" and table["waits"]["REASON"] == "Placement"
    assert table["fits"]["REASON"] in ("Scheduled", "Running"), table
    wide = {r["NAME"]: r for r in kubectl_table(tenant, "podgroups.scheduling.x-k8s.io", "-n",
                                                tenant.namespace, "-o", "wide")}
    assert wide["waits"]["MESSAGE"], wide


def test_a_queue_naming_a_pool_without_nodes_is_shown_as_not_fitting(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tenant.create_nodes(1, gpus=8)
    name = f"{tenant.queue}-typo"
    rest.call(tenant.cp.custom.create_cluster_custom_object, *QUEUES, {
        "apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue", "metadata": {"name": name},
        "spec": {"namespaces": [tenant.namespace],
                 "quotas": [{"pool": f"{tenant.pool}x", "nominal": {GPU: 8}}]}})

    def condition() -> dict[str, str]:
        obj = rest.call(tenant.cp.custom.get_cluster_custom_object, *QUEUES, name)
        found = [c for c in (obj.get("status") or {}).get("conditions") or ()
                 if c["type"] == "QuotaFitsCluster"]
        return found[0] if found else {}

    fit = wait_for(condition, 60, what="the QuotaFitsCluster condition")
    assert fit["status"] == "False", fit
    assert f"spec.quotas[pool={tenant.pool}x].pool: no node carries pool" in fit["message"]

    def rows() -> dict[str, dict[str, str]]:
        """Both queues' rows once both have their columns filled (each Queue's status is its
        own write, in no fixed order with the other's)."""
        table = {r["NAME"]: r for r in kubectl_table(tenant, "queues")}
        both = [table.get(name, {}), table.get(tenant.queue, {})]
        return table if all(r.get("VALID") and r.get("QUOTA-FITS") for r in both) else {}

    table = wait_for(rows, 60, what="the VALID and QUOTA-FITS columns of both queues")
    row = table[name]
    assert (row["VALID"], row["QUOTA-FITS"]) == ("True", "False"), row
    # The tenant's own queue has 1000 GPUs of quota on one 8-GPU node: said, and still valid.
    own = table[tenant.queue]
    assert (own["VALID"], own["QUOTA-FITS"]) == ("True", "False"), own


def test_a_reserved_gang_shows_its_estimated_start_as_a_column_not_in_its_message(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """Issue 16: the ETA was a countdown inside the message (a write per cycle), and the
    queue position was in it too. They are the PodGroup's ``status.estimatedStart`` and
    ``status.queuePosition`` now, shown by ``kubectl get podgroups``, and the message stays
    the same from cycle to cycle."""
    tenant.create_nodes(1, gpus=8)
    tenant.create_group("runs", 1)
    rest.call(tenant.cp.custom.patch_namespaced_custom_object, PODGROUP_GROUP, PODGROUP_VERSION,
              tenant.namespace, PODGROUP_PLURAL, "runs",
              {"metadata": {"annotations": {"gangscheduler.io/expected-runtime": "2h"}}})
    tenant.create_pod("runs-0", gpus=8, group="runs")
    wait_for(lambda: tenant.bound(["runs-0"]), 60, what="the running gang bound")
    tenant.create_gang("next", 1, gpus=8)

    def reserved() -> dict[str, str]:
        row = {r["NAME"]: r for r in kubectl_table(
            tenant, "podgroups.scheduling.x-k8s.io", "-n", tenant.namespace)}.get("next", {})
        return row if row.get("ESTIMATEDSTART") else {}

    row = wait_for(reserved, 60, what="an EstimatedStart for the waiting gang")
    status = tenant.group_status("next")
    assert status["estimatedStart"] == row["ESTIMATEDSTART"] and status["estimateTime"]
    message = status["conditions"][0]["message"]
    assert message.startswith("Reserved") and "estimated start in" not in message, message
    # Nor the queue position: a field and a column of its own (it moves as others start).
    assert "in queue order" not in message, message
    assert status["queuePosition"] == 1 and row["POSITION"] == "1", (status, row)
    # Cycles pass (and their writes are out): nothing about the answer changed, so nothing
    # is rewritten. Counted in cycles, not seconds: a loaded machine may run none in 3 s.
    live_scheduler.run_cycles(6)
    again = tenant.group_status("next")
    assert (again["conditions"][0]["message"], again["estimateTime"]) == (
        message, status["estimateTime"])


def test_kubectl_describe_pod_shows_why_its_gang_waits(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """Issue 16: ``kubectl describe pod`` of a waiting member said ``Events: <none>`` (the
    events went to the PodGroup only). Its events and its PodScheduled condition now say why,
    read with the real kubectl as the pod's owner would."""
    tenant.create_nodes(1, gpus=8)
    tenant.create_gang("toolarge", 2, gpus=16)  # a pod larger than any node: never fits

    def described() -> str:
        out = subprocess.run([str(build.kubectl_path()), "--kubeconfig",
                              str(tenant.cp.kubeconfig), "describe", "pod", "toolarge-0",
                              "-n", tenant.namespace], capture_output=True, text=True,
                             check=True, timeout=60).stdout
        # The first event may say the gang waits for its second member (created a moment
        # later); the event that counts is the one the complete gang gets.
        return out if "FailedScheduling" in out and "never fits" in out else ""

    text = wait_for(described, 90, what="a FailedScheduling event on the pod saying why")
    events = text[text.index("Events:"):]
    assert "<none>" not in events.splitlines()[0], events
    assert "gang-scheduler" in events, events
    assert "never fits" in events, events
    assert "PodScheduled" in text and "False" in text, text
