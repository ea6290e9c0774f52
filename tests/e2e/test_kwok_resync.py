"""The kwok resync (``scheduler.tools.devcluster.resync``) replays a pod exit kwok lost.

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

kwok also re-lists its pods now and then (twice in one 16-minute run of the suite), and a
re-list replays every pod's due stage: that finishes a lost exit on its own (run 4 of the flake
check at 2da5552, 10 s after the policy went; etcd had no write to the pod in between). A
*sentinel* pod with a malformed annotation shows a re-list: kwok warns about it each time it
plays its stage, and nothing else makes it play again. An attempt spoiled by a re-list is
made again; a trainer finished with no re-list fails the test.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import kwok, rest, resync
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.conftest import SKIP_REASON, e2e_disabled

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(e2e_disabled(), reason=SKIP_REASON)]

LOST_FOR_S = 12.0  # longer than kwok would take to retry, were it to (it finished in ~1 s)
BARRIER = "barrier"  # the pods whose exit the policy lets through start with this
BARRIER_RUNTIME_S = 3.0  # how long kwok's last job for the trainer has to send its refused patch
SENTINEL = "sentinel"  # kwok warns about it each time it plays its stage: once, or on a re-list
ATTEMPTS = 3  # kwok re-lists minutes apart: three windows of ~20 s all spoiled is not chance


def refuse_exits(namespace: str, attempt: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A policy and its binding that refuse a pod status write setting ``Succeeded`` in
    *namespace*, but for the barriers'."""
    name = f"refuse-exits-{namespace}-{attempt}"
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
                 "validations": [{"expression": f"object.metadata.name.startsWith('{BARRIER}') || "
                                                "object.status.phase != 'Succeeded'",
                                  "message": "a pod exit refused, as in an etcd outage"}]}}
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]}}
    return policy, binding


def sentinel_plays(cp: ControlPlane, namespace: str) -> int:
    """How many times kwok has played the sentinel's stage (its warning's series count)."""
    events = rest.call(cp.core.list_namespaced_event, namespace,
                       field_selector=f"involvedObject.name={SENTINEL}")["items"]
    return sum(int((e.get("series") or {}).get("count") or e.get("count") or 1) for e in events
               if e.get("reason") == "BadSimulationAnnotation")


class ExitProbe:
    """Patches the canary (no node, so kwok never sees it) to ``Succeeded`` with a new message
    each time, so every write is a real change that admission must pass."""

    def __init__(self, cp: ControlPlane, namespace: str) -> None:
        self.cp, self.namespace, self.tries = cp, namespace, itertools.count()
        cp.create_pod(namespace, "canary", scheduler_name="nobody")

    def allowed(self) -> bool:
        body = {"status": {"phase": "Succeeded", "message": f"try {next(self.tries)}"}}
        try:
            rest.call(self.cp.core.patch_namespaced_pod_status, "canary", self.namespace, body)
        except client.ApiException as exc:
            if exc.status in (403, 422) and "etcd outage" in str(exc.body):
                return False
            raise
        return True


def lose_an_exit(cp: ControlPlane, namespace: str, node: str, probe: ExitProbe,
                 attempt: int) -> str | None:
    """A trainer whose exit kwok was refused, still Running ``LOST_FOR_S`` after the refusal
    stopped; None if a kwok re-list finished it meanwhile."""
    admission = client.AdmissionregistrationV1Api(cp.api)
    policy, binding = refuse_exits(namespace, attempt)
    rest.call(admission.create_validating_admission_policy, policy)
    rest.call(admission.create_validating_admission_policy_binding, binding)
    wait_for(lambda: not probe.allowed(), 60, 0.2, what="the policy refusing pod exits")

    trainer, barrier = f"trainer-{attempt}", f"{BARRIER}-{attempt}"
    log = cp.cluster.state_dir / "logs" / "kwok.log"
    mark = log.stat().st_size
    cp.create_pod(namespace, trainer, scheduler_name="nobody", runtime_s=1.0)
    assert cp.bind(namespace, trainer, node) == 201
    cp.wait_pod_phase(namespace, trainer, "Running", timeout_s=60)

    # kwok tries to finish it a second after it started, is refused and logs it; it does not
    # try again until it re-lists, also once the policy is gone.
    def refused() -> bool:
        with log.open("rb") as f:
            f.seek(mark)
            return any(f"{namespace}/{trainer}".encode() in line and b"failed" in line.lower()
                       for line in f)

    wait_for(refused, 60, 0.2, what=f"kwok refused {trainer}'s exit ({log})")
    plays = sentinel_plays(cp, namespace)
    # Created after the trainer's last write, so behind all its events on kwok's stream: once
    # kwok has finished it, any second try at the trainer's exit was due earlier, and refused.
    cp.create_pod(namespace, barrier, scheduler_name="nobody", runtime_s=BARRIER_RUNTIME_S)
    assert cp.bind(namespace, barrier, node) == 201
    cp.wait_pod_phase(namespace, barrier, "Succeeded", timeout_s=60)
    rest.call(admission.delete_validating_admission_policy_binding, binding["metadata"]["name"])
    rest.call(admission.delete_validating_admission_policy, policy["metadata"]["name"])
    wait_for(probe.allowed, 60, 0.2, what="the policy gone")
    time.sleep(LOST_FOR_S)
    pod = cp.get_pod(namespace, trainer)
    assert pod is not None
    if pod["status"]["phase"] == "Running":
        return trainer
    # A re-list plays the sentinel too, maybe a moment after the trainer.
    wait_for(lambda: sentinel_plays(cp, namespace) > plays, 30, 0.5,
             what=f"{trainer} was finished by kwok without a re-list: {pod['status']}")
    return None


def test_a_pod_exit_kwok_lost_is_replayed_by_the_resync(control_plane: ControlPlane,
                                                         namespace: str) -> None:
    cp = control_plane
    node = cp.create_node(gpus=0)
    cp.create_pod(namespace, SENTINEL, scheduler_name="nobody",
                  annotations={kwok.SIMULATED_RUNTIME: "forever"})
    assert cp.bind(namespace, SENTINEL, node) == 201
    wait_for(lambda: sentinel_plays(cp, namespace) >= 1, 60, 0.2,
             what="kwok's warning about the sentinel")
    probe = ExitProbe(cp, namespace)
    trainer = None
    for attempt in range(ATTEMPTS):
        trainer = lose_an_exit(cp, namespace, node, probe, attempt)
        if trainer is not None:
            break
    assert trainer is not None, f"a kwok re-list finished the trainer in each of {ATTEMPTS} tries"
    pod = cp.get_pod(namespace, trainer)
    assert pod is not None and resync.overdue(pod, time.time()) == "pod-exit"

    assert resync.resync(cp.api, namespace) == [(trainer, "pod-exit")]
    finished = cp.wait_pod_phase(namespace, trainer, "Succeeded", timeout_s=60)
    assert finished["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    # Nothing left behind: the canary has no node, the sentinel no runtime kwok can read.
    assert resync.resync(cp.api, namespace) == []
