"""The apiserver half of the fence: the policy's manifests as shipped, and the new leader's
wait until the apiserver sees its term (against a fake that answers as the policy does)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.kube.client import Response, TransportError
from scheduler.kube.lead import fence_policy
from scheduler.kube.lead.fence import (
    LEADER_ANNOTATION,
    LEASE_ANNOTATION,
    TERM_ANNOTATION,
    FenceToken,
)

ROOT = Path(__file__).resolve().parents[3]
REFUSED = Response(403, json.dumps({"message": "gang-scheduler leader fence: written by a in "
                                               "term 1, but the Lease ns/l is held by b"}).encode())
B2 = FenceToken("b", 2, "sched/l")
NO_POD = Response(404, json.dumps({"message": 'pods "gang-scheduler-fence-probe" not found'}
                                  ).encode())


class Answers:
    """Answers the probe with *replies* in turn, recording what was sent."""

    def __init__(self, *replies: Response | Exception) -> None:
        self.replies, self.sent = list(replies), list[tuple[str, str, Any, Any]]()

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                **_: Any) -> Response:
        self.sent.append((method, path, query, body))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_new_leader_waits_until_the_apiserver_sees_its_term() -> None:
    client, clock = Answers(REFUSED, REFUSED, NO_POD), Clock()
    waited = fence_policy.wait_until_seen(client, B2, "sched", interval=0.05,
                                          monotonic=clock, sleep=clock.sleep)
    assert waited == pytest.approx(0.10)
    method, path, query, body = client.sent[0]
    assert (method, query) == ("POST", {"dryRun": "All"})  # nothing is ever written
    assert path == "/api/v1/namespaces/sched/pods/gang-scheduler-fence-probe/binding"
    assert body["metadata"]["annotations"] == {LEADER_ANNOTATION: "b", TERM_ANNOTATION: "2",
                                               LEASE_ANNOTATION: "sched/l"}


@pytest.mark.parametrize("reply", [
    Response(403, b'{"message": "pods/binding is forbidden: User x cannot create"}'),
    TransportError("connection refused")])
def test_a_probe_that_cannot_be_answered_gives_up_at_once(reply: Response | Exception) -> None:
    """The writes are still fenced (a lagging apiserver refuses them); only the wait ends."""
    assert fence_policy.wait_until_seen(Answers(reply), B2, "sched") is None


def test_the_wait_ends_at_its_timeout_or_when_the_term_is_lost() -> None:
    clock = Clock()
    assert fence_policy.wait_until_seen(Answers(*[REFUSED] * 30), B2, "ns",
                                        timeout=1.0, interval=0.1, monotonic=clock,
                                        sleep=clock.sleep) is None
    assert 1.0 <= clock.now < 1.2
    client = Answers(REFUSED)
    leads = iter([True, False])
    assert fence_policy.wait_until_seen(client, B2, "ns",
                                        leading=lambda: next(leads), sleep=lambda _: None) is None
    assert len(client.sent) == 1


def test_the_shipped_manifests_are_the_policy_for_the_configured_lease() -> None:
    """deploy/ carries exactly what ``fence_policy`` builds for the shipped config's Lease
    (one place for the rule; the Helm chart is checked against it in its own test)."""
    config = yaml.safe_load(yaml.safe_load((ROOT / "deploy/configmap.yaml").read_text())
                            ["data"]["config.yaml"])["leaderElection"]
    shipped = [yaml.safe_load((ROOT / f"deploy/leader-fence-{kind}.yaml").read_text())
               for kind in ("policy", "binding")]
    for obj in shipped:
        assert obj["metadata"].pop("labels")["app.kubernetes.io/part-of"] == "gang-scheduler"
    assert shipped == fence_policy.manifests(config["leaseNamespace"], config["leaseName"])
    kustomization = yaml.safe_load((ROOT / "deploy/kustomization.yaml").read_text())
    assert {"leader-fence-policy.yaml", "leader-fence-binding.yaml"} <= set(
        kustomization["resources"])


def test_the_policy_checks_bindings_evictions_and_the_scheduler_s_pod_deletions() -> None:
    spec = fence_policy.policy()["spec"]
    assert [(r["operations"], r["resources"]) for r in spec["matchConstraints"]["resourceRules"]] \
        == [(["CREATE"], ["pods/binding", "pods/eviction"]), (["UPDATE", "DELETE"], ["pods"])]
    (condition,) = spec["matchConditions"]
    assert f"[?'{LEASE_ANNOTATION}'].orValue('') == params.metadata.namespace" in \
        condition["expression"]
    assert "== request.userInfo.username" in condition["expression"]  # only its own deletes
    binding = fence_policy.binding("sched", "lease")["spec"]
    # Deny would refuse every bind in the cluster while the Lease does not exist yet.
    assert binding["paramRef"]["parameterNotFoundAction"] == "Allow"
