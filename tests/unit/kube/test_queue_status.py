"""Queue status: the figures a cycle reports, written by the leader only, only on change, and
never over the Valid condition; validity decided by LivePolicies, with queues that waited for
their parent marked valid once it arrives."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from scheduler.decide.tallies import QueueTally
from scheduler.kube.client import MERGE_PATCH, Response
from scheduler.kube.read import informer
from scheduler.kube.read.policy_feed import LivePolicies
from scheduler.kube.write.queue_status import QueueStatusPublisher, status_of
from scheduler.model.demand import gpus_of
from scheduler.model.resources import Resources
from scheduler.report.queue_report import queue_reports
from tests.unit.policies.builders import policies, queue

TREE = policies(queue("org", quota={"p": 16}), queue("a", "org", weight=1, quota={"p": 0}),
                queue("b", "org", weight=3, quota={"p": 0}))


def reports(a_gpus: int = 4, b_gpus: int = 12, pending: int = 2,
            capacity: dict[str, Resources] | None = None) -> Any:
    tallies = [
        QueueTally("a", (("p", Resources.of(gpu=a_gpus, cpu=1500)),), running=a_gpus,
                    admitted=1, pending=pending, borrowed_share=0.0),
        QueueTally("b", (("p", Resources.of(gpu=b_gpus)),), running=b_gpus, admitted=0,
                    pending=4, borrowed_share=0.5),
        QueueTally("org", (), running=0, admitted=0, pending=0, borrowed_share=0.0),
    ]
    return queue_reports(tallies, TREE, capacity=capacity)


@dataclass
class Api:
    status: int = 200
    patches: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        assert method == "PATCH" and path.endswith("/status"), (method, path)
        with self.lock:
            self.patches.append((path.split("/")[-2], body, content_type))
        return Response(self.status, b"{}")

    def by_queue(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for name, body, _ in self.patches:
            out.setdefault(name, []).append(body["status"])
        return out


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_status_fields_match_the_crd_printer_columns() -> None:
    by_name = {r.name: status_of(r) for r in reports()}
    a, org = by_name["a"], by_name["org"]
    assert {k: a[k] for k in ("allocatedGPUs", "nominalGPUs", "pendingGangs", "admittedGangs",
                              "fairShare", "usageShare")} == {
        "allocatedGPUs": 4, "nominalGPUs": 0, "pendingGangs": 2, "admittedGangs": 4,
        "fairShare": 0.25, "usageShare": 0.25}
    assert a["pools"] == [{"pool": "p", "allocated": {"nvidia.com/gpu": 4},
                           "nominal": {"nvidia.com/gpu": 0},
                           "borrowed": {"nvidia.com/gpu": 4}}]
    # A parent shows its subtree: what its children are allocated against the quota they share.
    assert (org["allocatedGPUs"], org["nominalGPUs"], org["pendingGangs"]) == (16, 16, 6)
    assert org["pools"][0]["borrowed"] == {}
    assert "conditions" not in a and "observedGeneration" not in a  # LivePolicies' keys


def test_figures_are_written_on_change_at_most_every_interval() -> None:
    api, clock = Api(), Clock()
    pub = QueueStatusPublisher(api, lambda: True, min_interval=3.0, monotonic=clock)
    assert pub.publish(reports()) == 3
    pub.flush()
    assert all(ct == MERGE_PATCH for _, _, ct in api.patches)
    clock.now = 10.0
    assert pub.publish(reports()) == 0  # nothing changed
    # a and its parent (b's share of org's 16 GPUs stays: together they have no more)
    assert pub.publish(reports(a_gpus=3)) == 2
    pub.flush()
    clock.now = 11.0
    assert pub.due_in() is None  # nothing postponed
    assert pub.publish(reports(a_gpus=2)) == 0  # changed again, but too soon
    assert pub.due_in() == 2.0  # postponed: the loop publishes again then, cycle or not
    clock.now = 13.5
    assert pub.publish(reports(a_gpus=2)) == 2  # the latest value, once due
    assert pub.due_in() is None
    pub.close()
    assert [s["allocatedGPUs"] for s in api.by_queue()["a"]] == [4, 3, 2]


def test_a_failed_write_is_retried_when_due() -> None:
    api, clock = Api(status=500), Clock()
    pub = QueueStatusPublisher(api, lambda: True, min_interval=3.0, monotonic=clock)
    pub.publish(reports())
    pub.flush()
    api.status = 200
    clock.now = 3.0
    assert pub.publish(reports()) == 3
    pub.close()


def test_a_standby_writes_nothing_and_catches_up_on_validity_when_it_leads() -> None:
    api, clock = Api(), Clock()
    leading = [False]
    pub = QueueStatusPublisher(api, lambda: leading[0], monotonic=clock)
    condition = {"type": "Valid", "status": "False"}
    valid = {"conditions": [condition], "observedGeneration": 2}
    pub.set_validity("a", valid)
    pub.flush()
    assert api.patches == []
    leading[0] = True
    pub.took_over()
    pub.publish(reports())
    pub.close()
    last = api.by_queue()["a"][-1]
    assert last["observedGeneration"] == 2 and condition in last["conditions"]


def test_validity_is_written_at_once_by_the_leader() -> None:
    api = Api()
    pub = QueueStatusPublisher(api, lambda: True)
    pub.set_validity("a", {"conditions": [{"type": "Valid", "status": "True"}]})
    pub.flush()
    assert api.by_queue() == {"a": [{"conditions": [{"type": "Valid", "status": "True"}]}]}
    pub.publish(reports())  # already written: not again
    pub.close()
    assert len(api.by_queue()["a"]) == 2  # the condition, then the figures


def queue_obj(name: str, parent: str | None = None, generation: int = 1,
              gpus: int = 8) -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaces": ["*"],
                            "quotas": [{"pool": "p", "nominal": {"nvidia.com/gpu": gpus}}]}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name, "generation": generation}, "spec": spec}


def test_a_child_seen_before_its_parent_becomes_valid_when_the_parent_arrives() -> None:
    written: list[tuple[str, dict[str, Any]]] = []
    live = LivePolicies(write_status=lambda n, s: written.append((n, json.loads(json.dumps(s)))))
    live.handle(informer.EventType.ADDED, queue_obj("team", parent="org", generation=3))
    assert written[-1][1]["conditions"][0]["status"] == "False"
    assert "team" in live.invalid
    live.handle(informer.EventType.ADDED, queue_obj("org"))
    assert live.invalid == {}
    assert "team" in live.current().queues.queues
    team = [s for n, s in written if n == "team"]
    assert team[-1]["conditions"][0]["status"] == "True"
    assert team[-1]["observedGeneration"] == 3


def test_an_invalid_update_keeps_the_last_good_version_and_says_why() -> None:
    written: list[tuple[str, dict[str, Any]]] = []
    live = LivePolicies(write_status=lambda n, s: written.append((n, s)))
    live.handle(informer.EventType.ADDED, queue_obj("team", gpus=8))
    live.handle(informer.EventType.MODIFIED, queue_obj("team", parent="nope", generation=2,
                                                       gpus=99))
    cond = written[-1][1]["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec")
    assert "spec.parent" in cond["message"] and "last valid version" in cond["message"]
    assert written[-1][1]["observedGeneration"] == 2
    quota = live.current().queues.queues["team"].quotas[0]
    assert gpus_of(quota.nominal) == 8
    assert set(live.invalid) == {"team"}
    # Another queue arriving does not make the refused edit look valid.
    live.handle(informer.EventType.ADDED, queue_obj("other"))
    assert set(live.invalid) == {"team"}


def test_a_status_only_change_is_not_judged_again() -> None:
    """Our own status writes come back as MODIFIED events with the same generation."""
    written: list[tuple[str, dict[str, Any]]] = []
    live = LivePolicies(write_status=lambda n, s: written.append((n, s)))
    obj = queue_obj("team")
    live.handle(informer.EventType.ADDED, obj)
    live.handle(informer.EventType.MODIFIED, {**obj, "status": {"allocatedGPUs": 3}})
    assert len(written) == 1
    live.handle(informer.EventType.MODIFIED, queue_obj("team", generation=2, gpus=4))
    assert len(written) == 2
    assert gpus_of(live.current().queues.queues["team"].quotas[0].nominal) == 4


def conditions_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in body.get("conditions", ())}


def test_a_quota_the_cluster_cannot_honour_is_a_condition_beside_valid() -> None:
    """The issue's case: a live Queue whose quota names a pool no node carries was marked
    only "queue accepted and in force". Now the leader says so, naming the field, and keeps
    the Valid condition (a merge patch replaces the whole list)."""
    api, clock = Api(), Clock()
    pub = QueueStatusPublisher(api, lambda: True, min_interval=3.0, monotonic=clock)
    pub.set_validity("org", {"conditions": [{"type": "Valid", "status": "True"}]})
    pub.publish(reports(capacity={"q": Resources.of(gpu=64)}))  # pool "p" has no nodes
    pub.flush()
    org = conditions_of(api.by_queue()["org"][-1])
    assert org["Valid"]["status"] == "True"
    assert org["QuotaFitsCluster"]["status"] == "False"
    assert "spec.quotas[pool=p].pool: no node carries pool 'p'" in \
        org["QuotaFitsCluster"]["message"]
    # Nothing changed: nothing written, however often the cycle reports.
    clock.now = 10.0
    written = len(api.patches)
    assert pub.publish(reports(capacity={"q": Resources.of(gpu=64)})) == 0
    # The nodes arrive, smaller than the quota: a new verdict, written once due.
    assert pub.publish(reports(capacity={"p": Resources.of(gpu=8)})) >= 1
    pub.flush()
    assert len(api.patches) > written
    org = conditions_of(api.by_queue()["org"][-1])
    assert "spec.quotas[pool=p].nominal.nvidia.com/gpu: 16 is more than pool 'p' has (8)" in \
        org["QuotaFitsCluster"]["message"]
    # An edit's verdict is written at once and keeps the quota condition.
    pub.set_validity("org", {"conditions": [{"type": "Valid", "status": "False"}]})
    pub.close()
    org = conditions_of(api.by_queue()["org"][-1])
    assert org["Valid"]["status"] == "False" and org["QuotaFitsCluster"]["status"] == "False"


def test_a_queue_whose_quotas_fit_says_so_and_without_validity_keeps_its_conditions() -> None:
    api = Api()
    pub = QueueStatusPublisher(api, lambda: True)
    pub.publish(reports(capacity={"p": Resources.of(gpu=16)}))
    pub.flush()
    # No verdict on the spec known yet (a new leader): the conditions are left alone.
    assert all("conditions" not in body for body in api.by_queue()["org"])
    pub.set_validity("org", {"conditions": [{"type": "Valid", "status": "True"}]})
    pub.close()
    org = conditions_of(api.by_queue()["org"][-1])
    assert org["QuotaFitsCluster"]["status"] == "True", org
