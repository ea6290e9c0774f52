"""The leader fence the apiserver enforces (``scheduler.kube.lead.fence_policy``), on the real
kube-apiserver: a Binding or Eviction stamped with a term the Lease has moved past is refused
with the policy's message, one with the current term goes through (its stamp copied onto the
pod), and an unstamped one (kube-scheduler's, a user's) is never checked; the same for the
scheduler's pod deletions (stamped on the pod first). Then the scheduler's own path: a stale
replica's gang bind comes back fenced, nothing deleted, and a new leader's wait until the
apiserver sees its term.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from scheduler.kube.client import MERGE_PATCH, KubeClient, Response, connect
from scheduler.kube.lead import fence_policy
from scheduler.kube.lead.fence import (
    LEADER_ANNOTATION,
    LEASE_ANNOTATION,
    TERM_ANNOTATION,
    USER_ANNOTATION,
    FencedClient,
    FenceToken,
    whoami,
)
from scheduler.kube.write.binder import FENCED, Binder
from scheduler.model import PodRef
from scheduler.tools.devcluster import rest
from tests.e2e import fence_support
from tests.e2e.cluster_api import ControlPlane

pytestmark = pytest.mark.e2e
LEASE = "fenced"


@dataclass
class Fence:
    cp: ControlPlane
    api: KubeClient
    namespace: str  # the pods' and the Lease's
    node: str

    def lease_to(self, holder: str, transitions: int) -> FenceToken:
        """Write the Lease as a takeover would (holder, leaseTransitions); the token of that
        term, once the apiserver's fence sees it."""
        coordination = client.CoordinationV1Api(self.cp.api)
        lease = rest.call(coordination.read_namespaced_lease, LEASE, self.namespace)
        lease["spec"].update(holderIdentity=holder, leaseTransitions=transitions,
                             leaseDurationSeconds=15)
        rest.call(coordination.replace_namespaced_lease, LEASE, self.namespace, lease)
        token = FenceToken(holder, transitions, f"{self.namespace}/{LEASE}")
        assert fence_policy.wait_until_seen(self.api, token, self.namespace) is not None
        return token

    def pod(self) -> dict[str, Any]:
        return self.cp.create_pod(self.namespace, f"p-{uuid.uuid4().hex[:6]}")

    def post(self, pod: dict[str, Any], sub: str, token: FenceToken | None) -> Response:
        """A Binding (to the node) or an Eviction of *pod*, stamped with *token* if any."""
        name = pod["metadata"]["name"]
        metadata: dict[str, Any] = {"name": name, "namespace": self.namespace}
        if token is not None:
            metadata["annotations"] = token.annotations()
        body: dict[str, Any] = (
            {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
             "target": {"apiVersion": "v1", "kind": "Node", "name": self.node}}
            if sub == "binding" else
            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": metadata})
        return self.api.request("POST", f"/api/v1/namespaces/{self.namespace}/pods/{name}/{sub}",
                                body=body)


@pytest.fixture
def fence(control_plane: ControlPlane) -> Iterator[Fence]:
    namespace = control_plane.new_namespace("fence")
    api = connect(str(control_plane.kubeconfig))
    try:
        fence_support.install(control_plane, api, namespace, LEASE)
        yield Fence(control_plane, api, namespace, control_plane.create_node(gpus=8))
    finally:
        api.close()


def assert_refused_as_stale(resp: Response, writer: str, term: int) -> None:
    assert resp.status == 403, (resp.status, resp.message())
    assert fence_policy.refused_by_policy(resp)
    assert (f"written by {writer} in term {term}, but the Lease " in resp.message()
            and "a stale leader" in resp.message()), resp.message()


@pytest.mark.parametrize("sub", ["binding", "eviction"])
def test_a_stale_term_is_refused_the_current_one_and_unstamped_ones_go_through(
        fence: Fence, sub: str) -> None:
    old = fence.lease_to("a", 3)
    new = fence.lease_to("b", 4)  # b took over: a's term 3 is stale
    if sub == "eviction":  # evictions of bound pods, as preemption sends them
        pods = [fence.pod() for _ in range(3)]
        for p in pods:
            assert fence.cp.bind(fence.namespace, p["metadata"]["name"], fence.node) == 201
    else:
        pods = [fence.pod() for _ in range(3)]
    stale, current, unstamped = pods

    assert_refused_as_stale(fence.post(stale, sub, old), "a", 3)
    same_holder_older_term = FenceToken("b", 2, new.lease)  # b's own earlier tenure
    assert_refused_as_stale(fence.post(stale, sub, same_holder_older_term), "b", 2)
    assert fence.post(current, sub, new).status == 201
    assert fence.post(unstamped, sub, None).status == 201

    got = fence.cp.get_pod(fence.namespace, stale["metadata"]["name"])
    assert got is not None and not got["metadata"].get("deletionTimestamp")
    assert not got["spec"].get("nodeName") or sub == "eviction"  # the refused write: nothing
    if sub == "binding":
        bound = fence.cp.get_pod(fence.namespace, current["metadata"]["name"])
        assert bound is not None and bound["spec"]["nodeName"] == fence.node
        # The apiserver copies a Binding's annotations onto the pod: who bound it, when.
        assert bound["metadata"]["annotations"] | new.annotations() == \
            bound["metadata"]["annotations"]
    else:
        for p in (current, unstamped):
            gone = fence.cp.get_pod(fence.namespace, p["metadata"]["name"])
            assert gone is None or gone["metadata"].get("deletionTimestamp")


def test_a_stamp_for_another_lease_is_left_to_that_lease_s_binding(fence: Fence) -> None:
    """Two installations in one cluster: each binding checks only its own Lease's stamps."""
    fence.lease_to("b", 4)
    other = FenceToken("a", 0, f"{fence.namespace}/some-other-lease")
    assert fence.post(fence.pod(), "binding", other).status == 201


def test_a_replica_in_a_stale_term_gets_its_gang_fenced_not_failed(fence: Fence) -> None:
    """The scheduler's own path end to end: its client-side check passes (a pause between
    check and send looks just like this), the apiserver refuses the stamped Bindings, and
    the Binder reports the gang fenced: nothing bound, nothing deleted, no retry."""
    stale = fence.lease_to("a", 5)
    fence.lease_to("b", 6)
    pods = [fence.pod() for _ in range(3)]
    refused: list[int] = []
    writes = FencedClient(fence.api, lambda: True, token=lambda: stale,
                          on_refused_by_apiserver=lambda: refused.append(1))
    binder = Binder(writes, concurrency=1)
    try:
        out = binder.bind_gang([(PodRef(fence.namespace, p["metadata"]["name"],
                                        p["metadata"]["uid"]), fence.node) for p in pods],
                               "gang-scheduler", f"{fence.namespace}/g")
    finally:
        binder.close()
    assert out.fenced and not out.transient and out.bound == () and out.parked == ()
    assert out.failed[0].code == FENCED and "held by b in term 6" in out.failed[0].reason
    assert refused == [1]  # the first refusal stops the gang: the rest are skipped
    for p in pods:
        got = fence.cp.get_pod(fence.namespace, p["metadata"]["name"])
        assert got is not None and not got["spec"].get("nodeName")
        assert not got["metadata"].get("deletionTimestamp")


def test_the_stamp_names_the_term_that_bound_the_pod(fence: Fence) -> None:
    token = fence.lease_to("a", 7)
    pod = fence.pod()
    writes = FencedClient(fence.api, lambda: True, token=lambda: token)
    binder = Binder(writes, concurrency=1)
    try:
        out = binder.bind_gang([(PodRef(fence.namespace, pod["metadata"]["name"],
                                        pod["metadata"]["uid"]), fence.node)],
                               "gang-scheduler", f"{fence.namespace}/g")
    finally:
        binder.close()
    assert out.ok
    got = fence.cp.get_pod(fence.namespace, pod["metadata"]["name"])
    assert got is not None
    notes = got["metadata"]["annotations"]
    assert (notes[LEADER_ANNOTATION], notes[TERM_ANNOTATION], notes[LEASE_ANNOTATION]) == \
        ("a", "7", f"{fence.namespace}/{LEASE}")


def test_a_new_leader_is_told_when_the_apiserver_sees_its_term(fence: Fence) -> None:
    """The probe: refused while the apiserver sees another term, answered once it sees
    this one (the lag, printed, is the apiserver's Lease informer)."""
    fence.lease_to("a", 1)
    token = FenceToken("b", 2, f"{fence.namespace}/{LEASE}")
    assert not fence_policy.seen(fence.api, token, fence.namespace)
    coordination = client.CoordinationV1Api(fence.cp.api)
    lease = rest.call(coordination.read_namespaced_lease, LEASE, fence.namespace)
    lease["spec"].update(holderIdentity="b", leaseTransitions=2)
    rest.call(coordination.replace_namespaced_lease, LEASE, fence.namespace, lease)
    waited = fence_policy.wait_until_seen(fence.api, token, fence.namespace, interval=0.005)
    assert waited is not None
    print(f"[fence] the apiserver saw the new term {waited * 1000:.1f} ms after the Lease "
          "write returned")


def test_a_stale_replica_s_pod_deletes_are_refused_and_the_leader_s_go_through(
        fence: Fence) -> None:
    """A rollback's DELETE has no object to stamp: the pod is stamped first (with the user
    deleting it), and both the stamp and the DELETE are checked against the Lease."""
    a5 = fence.lease_to("a", 5)
    pods = [fence.pod() for _ in range(3)]
    refs = [PodRef(fence.namespace, p["metadata"]["name"], p["metadata"]["uid"]) for p in pods]
    stale = Binder(FencedClient(fence.api, lambda: True, token=lambda: a5))
    assert stale.bind_gang([(r, fence.node) for r in refs], "gang-scheduler", "ns/g").ok
    user = whoami(fence.api)
    assert user
    # a stamps the second pod for deletion in its own term, then pauses: b takes over.
    stamp = {"metadata": {"annotations": {**a5.annotations(), USER_ANNOTATION: user}}}
    assert fence.api.request("PATCH", pod_path(fence, refs[1]), body=stamp,
                             content_type=MERGE_PATCH).ok
    b6 = fence.lease_to("b", 6)

    (failure,) = stale.delete_pods([refs[0]])  # stale: the stamp is refused
    assert failure.code == FENCED and "held by b in term 6" in failure.reason
    resumed = fence.api.request("DELETE", pod_path(fence, refs[1]), body={})  # stamped before
    assert_refused_as_stale(resumed, "a", 5)
    for ref in refs[:2]:
        got = fence.cp.get_pod(fence.namespace, ref.name)
        assert got is not None and not got["metadata"].get("deletionTimestamp")

    leader = Binder(FencedClient(fence.api, lambda: True, token=lambda: b6))
    try:
        assert leader.delete_pods(refs[:2]) == []  # the leader's own, stamped in its term
    finally:
        leader.close()
        stale.close()
    # A delete by anyone not stamping (the kubelet, a person): not checked, though the pod
    # carries the stale term's Binding stamp.
    assert fence.api.request("DELETE", pod_path(fence, refs[2]),
                             body={"gracePeriodSeconds": 0}).ok


def pod_path(fence: Fence, ref: PodRef) -> str:
    return f"/api/v1/namespaces/{fence.namespace}/pods/{ref.name}"
