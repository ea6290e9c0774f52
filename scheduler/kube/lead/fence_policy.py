"""The apiserver's half of the leader fence: an admission policy, and the wait for it.

``scheduler.kube.lead.fence`` stamps every Binding and Eviction a leader sends with its term
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

Pod DELETEs (the rollback of a partly bound gang) carry no object to stamp, only
``DeleteOptions``, which has no field for it. So the scheduler first stamps the pod itself
(a PATCH, ``FencedClient``), adding the user it deletes as; the policy refuses that UPDATE in a
stale term, and refuses a DELETE of a pod so stamped, by the user the stamp names, when the
stamp's term is not the Lease's: a pause between the stamp and the DELETE carries nothing
through. A pod stamped since by the new leader is one that leader is deleting itself. Deletes
by anyone else (the kubelet, the garbage collector, a person) are not checked; the one
exception is a person using the scheduler's own credentials on a pod whose stale delete was
refused, until the stamp's ``gangscheduler.io/leader-user`` is removed or the leader deletes
it (docs/operations.md).

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
from scheduler.kube.lead.fence import (
    LEADER_ANNOTATION,
    LEASE_ANNOTATION,
    REFUSAL_MARK,
    TERM_ANNOTATION,
    USER_ANNOTATION,
    FenceToken,
    refused_by_policy,
)

log = structlog.get_logger()

NAME = "gang-scheduler-leader-fence"
#: A pod name nobody uses: the probe's Binding must find no pod once it is admitted.
PROBE_POD = "gang-scheduler-fence-probe"
ADMISSION = "admissionregistration.k8s.io/v1"

_LEASE = "params.metadata.namespace + '/' + params.metadata.name"
_STAMP_KEYS = (LEADER_ANNOTATION, TERM_ANNOTATION, LEASE_ANNOTATION, USER_ANNOTATION)


def _notes(obj: str) -> str:
    """CEL: the annotations of *obj* (``object``, ``oldObject``), empty when it has none."""
    return f"{obj}.metadata.?annotations.orValue({{}})"


def _checked() -> str:
    """CEL: the requests the fence checks (everything else goes through unlooked at).

    CREATE of a Binding or Eviction stamped for this Lease; UPDATE of a pod that puts a
    deletion stamp (one naming a user) for this Lease on it, as the scheduler does before it
    deletes the pod; DELETE of a pod with such a stamp, by the user it names (everyone else's
    deletes of the pod, the kubelet's, the garbage collector's, a person's, are not the
    scheduler's and are not checked). Variables are not available to match conditions.
    """
    new, old = _notes("object"), _notes("oldObject")
    keys = ", ".join(f"'{k}'" for k in _STAMP_KEYS)
    return "\n".join([
        f"request.operation == 'CREATE' ? {new}[?'{LEASE_ANNOTATION}'].orValue('') == {_LEASE} :",
        f"request.operation == 'UPDATE' ? {new}[?'{LEASE_ANNOTATION}'].orValue('') == {_LEASE}",
        f"  && {new}[?'{USER_ANNOTATION}'].orValue('') != ''",
        f"  && [{keys}].exists(k, {new}[?k].orValue('') != {old}[?k].orValue('')) :",
        f"{old}[?'{LEASE_ANNOTATION}'].orValue('') == {_LEASE}",
        f"  && {old}[?'{USER_ANNOTATION}'].orValue('') == request.userInfo.username"])


def policy(name: str = NAME) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy (cluster-scoped; its binding names the Lease)."""
    variables = {
        # What was written: the Binding or Eviction, the pod as updated, the pod deleted.
        "stamp": _notes("(request.operation == 'DELETE' ? oldObject : object)"),
        "writer": f"variables.stamp[?'{LEADER_ANNOTATION}'].orValue('')",
        "writtenTerm": f"variables.stamp[?'{TERM_ANNOTATION}'].orValue('(none)')",
        "stamper": f"variables.stamp[?'{USER_ANNOTATION}'].orValue('')",
        "holder": "params.spec.?holderIdentity.orValue('')",
        "term": "string(params.spec.?leaseTransitions.orValue(0))",
    }
    message = "\n".join([
        f"'{REFUSAL_MARK} written by ' + variables.writer + ' in term ' + variables.writtenTerm",
        "+ ', but the Lease ' + params.metadata.namespace + '/' + params.metadata.name",
        "+ ' is held by ' + (variables.holder == '' ? 'nobody' : variables.holder)",
        "+ ' in term ' + variables.term + ': a stale leader'"])
    return {
        "apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"},
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                 "resources": ["pods/binding", "pods/eviction"]},
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE", "DELETE"],
                 "resources": ["pods"]}]},
            "matchConditions": [{"name": "stamped-by-a-leader-of-this-lease",
                                 "expression": _checked()}],
            "variables": [{"name": k, "expression": v} for k, v in variables.items()],
            "validations": [
                {"expression": "variables.writer == variables.holder && "
                               "variables.writtenTerm == variables.term",
                 "messageExpression": message,
                 "message": f"{REFUSAL_MARK} the write's term is not the Lease's",
                 "reason": "Forbidden"},
                {"expression": "request.operation != 'UPDATE' || "
                               "variables.stamper == request.userInfo.username",
                 "messageExpression": f"'{REFUSAL_MARK} a deletion stamp naming user ' + "
                                      "variables.stamper + ' written by ' + "
                                      "request.userInfo.username",
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
                    leading: Callable[[], bool] = lambda: True,
                    monotonic: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> float | None:
    """Wait until the apiserver's fence sees *token* (at most *timeout* s, while *leading*);
    the seconds waited, or None when it did not within the timeout or could not be asked
    (logged: the first writes may then be refused, which is safe, only slower)."""
    started = monotonic()
    while leading():
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
