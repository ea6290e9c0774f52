"""The kwok resync (``scheduler.devcluster.resync``) replays a pod exit kwok lost.

The loss is made real rather than assumed: a ValidatingAdmissionPolicy refuses this
namespace's pod status writes that set ``Succeeded``, as an apiserver whose etcd is restarting
refuses a write with a 500. kwok v0.8.0 does not retry a refused stage: the pod stays Running
after its simulated runtime, also once the policy is gone (the reliability rig's Job ``g1``
at 7cb69f3). One resync touches it and kwok finishes it.

kwok sees each of its own patches twice: in the patch's reply (a stage marked
``immediateNextStage`` goes on from there) and again as a watch event. Under load that event can
come after the refused exit and give kwok a second try (run 2 of the flake check at d13a2d9:
it finished the pod 2 s later, once the policy was gone). kwok watches every bound pod on one
stream, in resourceVersion order, so the policy stays until a later pod, the *barrier*, has
gone through its whole life: by then every event of the trainer's has reached kwok and been
refused too.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from kubernetes import client

from scheduler.devcluster import rest, resync
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.conftest import SKIP_REASON, e2e_disabled

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(e2e_disabled(), reason=SKIP_REASON)]

LOST_FOR_S = 12.0  # longer than kwok would take to retry, were it to (it finished in ~1 s)
BARRIER = "barrier"  # the one pod whose exit the policy lets through
BARRIER_RUNTIME_S = 3.0  # how long kwok's last job for the trainer has to send its refused patch


def refuse_exits(namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A policy and its binding that refuse a pod status write setting ``Succeeded`` in
    *namespace*, but for the barrier's."""
    name = f"refuse-exits-{namespace}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {
                     "namespaceSelector": {
                         "matchLabels": {"kubernetes.io/metadata.name": namespace}},
                     "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                        "operations": ["UPDATE"],
                                        "resources": ["pods/status"]}]},
                 "validations": [{"expression": f"object.metadata.name == '{BARRIER}' || "
                                                "object.status.phase != 'Succeeded'",
                                  "message": "a pod exit refused, as in an etcd outage"}]}}
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]}}
    return policy, binding


def test_a_pod_exit_kwok_lost_is_replayed_by_the_resync(control_plane: ControlPlane,
                                                         namespace: str) -> None:
    cp = control_plane
    admission = client.AdmissionregistrationV1Api(cp.api)
    policy, binding = refuse_exits(namespace)
    rest.call(admission.create_validating_admission_policy, policy)
    rest.call(admission.create_validating_admission_policy_binding, binding)
    # A canary the scheduler never sees (no node, another schedulerName): each try sets a new
    # message, so every write is a real change that admission must pass.
    cp.create_pod(namespace, "canary", scheduler_name="nobody")
    tries = itertools.count()

    def exit_allowed() -> bool:
        body = {"status": {"phase": "Succeeded", "message": f"try {next(tries)}"}}
        try:
            rest.call(cp.core.patch_namespaced_pod_status, "canary", namespace, body)
        except client.ApiException as exc:
            if exc.status in (403, 422) and "etcd outage" in str(exc.body):
                return False
            raise
        return True

    wait_for(lambda: not exit_allowed(), 60, 0.2, what="the policy refusing pod exits")

    log = cp.cluster.state_dir / "logs" / "kwok.log"
    mark = log.stat().st_size
    node = cp.create_node(gpus=0)
    cp.create_pod(namespace, "trainer", scheduler_name="nobody", runtime_s=1.0)
    assert cp.bind(namespace, "trainer", node) == 201
    cp.wait_pod_phase(namespace, "trainer", "Running", timeout_s=60)
    # kwok tries to finish it a second after it started, is refused and logs it; it does not
    # try again, also once the policy is gone.
    def refused() -> bool:
        with log.open("rb") as f:
            f.seek(mark)
            return any(f"{namespace}/trainer".encode() in line and b"failed" in line.lower()
                       for line in f)

    wait_for(refused, 60, 0.2, what=f"kwok refused trainer's exit ({log})")
    # Created after the trainer's last write, so behind all its events on kwok's stream: once
    # kwok has finished it, any second try at the trainer's exit was due earlier, and refused.
    cp.create_pod(namespace, BARRIER, scheduler_name="nobody", runtime_s=BARRIER_RUNTIME_S)
    assert cp.bind(namespace, BARRIER, node) == 201
    cp.wait_pod_phase(namespace, BARRIER, "Succeeded", timeout_s=60)
    rest.call(admission.delete_validating_admission_policy_binding, binding["metadata"]["name"])
    rest.call(admission.delete_validating_admission_policy, policy["metadata"]["name"])
    wait_for(exit_allowed, 60, 0.2, what="the policy gone")
    time.sleep(LOST_FOR_S)
    pod = cp.get_pod(namespace, "trainer")
    assert pod is not None and pod["status"]["phase"] == "Running", pod
    assert resync.overdue(pod, time.time()) == "pod-exit"

    assert resync.resync(cp.api, namespace) == [("trainer", "pod-exit")]
    finished = cp.wait_pod_phase(namespace, "trainer", "Succeeded", timeout_s=60)
    assert finished["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert resync.resync(cp.api, namespace) == []  # nothing left behind (the canary: no node)
