"""The apiserver's half of the leader fence: an admission policy, and the wait for it.

``scheduler.kube.fence`` stamps every Binding and Eviction a leader sends with its term
(``FenceToken``). The ValidatingAdmissionPolicy built here takes the leader Lease as its
parameter and refuses a stamped request whose stamp is not the Lease's current holder and
``leaseTransitions``: a leader paused between its own check and the send (SIGSTOP, a GC pause,
a frozen VM) is refused by the apiserver once a standby has taken the Lease, however late it
resumes. ``matchConditions`` leave every request not stamped for this Lease alone:
kube-scheduler's binds, a user's evictions, a single replica with leader election off,
another gang-scheduler installation with a Lease of its own (its own binding checks it).
``parameterNotFoundAction: Allow`` for the same reason: the apiserver resolves the parameter
before it evaluates the match conditions, so ``Deny`` would refuse every bind in the cluster
while the Lease does not exist (before the first replica starts). A stamped write needs a
Lease to have been acquired, so the Lease only goes missing if someone deletes it.

Pod DELETEs (the rollback of a partly bound gang) are not covered: a DELETE carries no object
to stamp, only ``DeleteOptions``, which has no free-form field. Fencing them would mean
stamping the pod first (a PATCH, fenced the same way on UPDATE) and refusing the scheduler's
own DELETE when the pod's stamp is stale, which needs the policy to tell the scheduler's
deletes from everyone else's by ``request.userInfo`` (README, "Operating it").

The apiserver reads the Lease through an informer, so right after a takeover it may still see
the previous term for a moment and refuse the new leader's first writes. ``wait_until_seen``
asks it: a dry-run Binding of a pod that does not exist, stamped with the new term, is
refused by the policy while the apiserver still sees the old term and answers 404 (the pod)
once it sees the new one, or at once when the policy is not installed. The new leader waits
for that before its first cycle (``scheduler.kube.runner``). Once an apiserver sees the new
term it refuses the old one's stamps, so a stale write can only have landed before the new
leader's first write. With several apiservers each has its own informer and the probe asks
one of them; another may lag a little longer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog

from scheduler.kube.client import Requester, TransportError, path_segment
from scheduler.kube.fence import (
    LEADER_ANNOTATION,
    LEASE_ANNOTATION,
    REFUSAL_MARK,
    TERM_ANNOTATION,
    FenceToken,
    refused_by_policy,
)

log = structlog.get_logger()

NAME = "gang-scheduler-leader-fence"
#: A pod name nobody uses: the probe's Binding must find no pod once it is admitted.
PROBE_POD = "gang-scheduler-fence-probe"
ADMISSION = "admissionregistration.k8s.io/v1"

_ANNOTATIONS = "object.metadata.annotations"


def policy(name: str = NAME) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy (cluster-scoped; its binding names the Lease)."""
    variables = {
        "writer": f"{_ANNOTATIONS}['{LEADER_ANNOTATION}']",
        "writtenTerm": f"'{TERM_ANNOTATION}' in {_ANNOTATIONS} ? "
                       f"{_ANNOTATIONS}['{TERM_ANNOTATION}'] : '(none)'",
        "holder": "has(params.spec.holderIdentity) ? params.spec.holderIdentity : ''",
        "term": "string(has(params.spec.leaseTransitions) ? params.spec.leaseTransitions : 0)",
    }
    message = (f"'{REFUSAL_MARK} written by ' + variables.writer + ' in term ' + "
               "variables.writtenTerm + ', but the Lease ' + params.metadata.namespace + '/' "
               "+ params.metadata.name + ' is held by ' + (variables.holder == '' ? 'nobody' "
               ": variables.holder) + ' in term ' + variables.term + ': a stale leader'")
    return {
        "apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"},
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["pods/binding", "pods/eviction"]}]},
            "matchConditions": [{
                "name": "stamped-by-a-leader-of-this-lease",
                "expression": f"has({_ANNOTATIONS}) && '{LEADER_ANNOTATION}' in {_ANNOTATIONS}"
                              f" && '{LEASE_ANNOTATION}' in {_ANNOTATIONS} && "
                              f"{_ANNOTATIONS}['{LEASE_ANNOTATION}'] == "
                              "params.metadata.namespace + '/' + params.metadata.name"}],
            "variables": [{"name": k, "expression": v} for k, v in variables.items()],
            "validations": [{
                "expression": "variables.writer == variables.holder && "
                              "variables.writtenTerm == variables.term",
                "messageExpression": message,
                "message": f"{REFUSAL_MARK} the write's term is not the Lease's",
                "reason": "Forbidden"}],
        },
    }


def binding(lease_namespace: str, lease_name: str, name: str = NAME,
            policy_name: str = NAME) -> dict[str, Any]:
    """The policy's binding to the scheduler's leader Lease (``leaderElection`` config); one
    per installation (Lease) in a cluster, all of the one policy."""
    return {
        "apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy_name, "validationActions": ["Deny"],
                 "paramRef": {"name": lease_name, "namespace": lease_namespace,
                              "parameterNotFoundAction": "Allow"}},
    }


def manifests(lease_namespace: str, lease_name: str, name: str = NAME) -> list[dict[str, Any]]:
    return [policy(name), binding(lease_namespace, lease_name, name)]


def seen(client: Requester, token: FenceToken, namespace: str) -> bool:
    """Does the apiserver's fence see *token* as the current term? (See the module
    docstring; nothing is written: dry run, and no such pod.) A transport error or an
    answer that is neither the policy's refusal nor the missing pod raises ``TransportError``
    or ``RuntimeError`` naming it."""
    body = {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": PROBE_POD, "namespace": namespace,
                         "annotations": token.annotations()},
            "target": {"apiVersion": "v1", "kind": "Node", "name": PROBE_POD}}
    path = f"/api/v1/namespaces/{path_segment(namespace)}/pods/{PROBE_POD}/binding"
    resp = client.request("POST", path, query={"dryRun": "All"}, body=body)
    if refused_by_policy(resp):
        return False
    if resp.status == 404:
        return True
    raise RuntimeError(f"fence probe POST {path}: HTTP {resp.status}: {resp.message()}")


def wait_until_seen(client: Requester, token: FenceToken, namespace: str, *,
                    timeout: float = 10.0, interval: float = 0.05,
                    holds: Callable[[], bool] = lambda: True,
                    monotonic: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> float | None:
    """Wait until the apiserver's fence sees *token* (at most *timeout* s, while *holds*);
    the seconds waited, or None when it did not within the timeout or could not be asked
    (logged: the first writes may then be refused, which is safe, only slower)."""
    started = monotonic()
    while holds():
        try:
            if seen(client, token, namespace):
                return monotonic() - started
        except (TransportError, RuntimeError) as exc:
            log.warning("fence_probe_failed", reason=str(exc))
            return None
        if monotonic() - started >= timeout:
            log.warning("fence_not_seen", term=token.transitions, timeout_s=timeout,
                        reason="the apiserver still sees another term of the Lease")
            return None
        sleep(interval)
    return None
