"""A gang's ProvisioningRequest: the objects written for a scale-up, and its state read back."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest

from scheduler.decide.plan import (
    CyclePlan,
    Members,
    PendingReason,
    PodSet,
    ReasonCategory,
    ScaleUp,
)
from scheduler.kube.client import Response
from scheduler.kube.read.provisioning_state import provisioning_state
from scheduler.kube.write.provisioning import (
    ATOMIC_SCALE_UP_CLASS,
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    GANG_LABEL,
    HOLD_DELAY,
    SCALE_UP_DELAY_ANNOTATION,
    ScaleUpWriter,
    provisioning_objects,
)
from scheduler.model import PodRef
from scheduler.model.node_groups import ProvisioningState, Stage

PLAN = ScaleUp("ml/train", "a100", 4, (PodSet("launcher", 1), PodSet("worker", 4)))
SPEC = {"nodeName": "n1", "hostname": "train-0", "subdomain": "train",
        "nodeSelector": {"pool": "train"},
        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}


def test_one_template_per_role_then_the_request_naming_them_with_counts() -> None:
    templates, request = provisioning_objects("ml", "train", PLAN,
                                              {"launcher": SPEC, "worker": SPEC})
    assert [t["metadata"]["name"] for t in templates] == ["gang-train-launcher",
                                                          "gang-train-worker"]
    assert request["apiVersion"] == "autoscaling.x-k8s.io/v1"
    assert request["metadata"] == {"name": "gang-train", "namespace": "ml",
                                   "labels": {GANG_LABEL: "train"}}
    assert request["spec"] == {
        "provisioningClassName": ATOMIC_SCALE_UP_CLASS,
        "podSets": [{"podTemplateRef": {"name": "gang-train-launcher"}, "count": 1},
                    {"podTemplateRef": {"name": "gang-train-worker"}, "count": 4}],
    }


def test_a_template_keeps_what_the_autoscaler_simulates_and_drops_the_pods_own_fields() -> None:
    templates, _ = provisioning_objects("ml", "train", PLAN, {"launcher": SPEC, "worker": SPEC})
    spec = templates[1]["template"]["spec"]
    assert spec == {"nodeSelector": {"pool": "train"}, "containers": SPEC["containers"]}


def test_a_role_without_a_member_spec_is_refused_naming_it() -> None:
    refusal = re.escape("ml/train: no member pod spec for role(s) worker")
    with pytest.raises(ValueError, match=refusal):
        provisioning_objects("ml", "train", PLAN, {"launcher": SPEC})


def cond(kind: str, status: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "message": message}


@pytest.mark.parametrize(("conditions", "expected"), [
    ([], ProvisioningState(Stage.ASKED)),
    ([cond("Accepted", "True")], ProvisioningState(Stage.ASKED)),
    ([cond("Provisioned", "True", "Capacity is provisioned")],
     ProvisioningState(Stage.PROVISIONED, "Capacity is provisioned")),
    ([cond("Provisioned", "False", "Capacity is not found, CA will try to find it later.")],
     ProvisioningState(Stage.NOT_FOUND, "Capacity is not found, CA will try to find it later.")),
    ([cond("Provisioned", "False", "x"), cond("Failed", "True", "request expired")],
     ProvisioningState(Stage.FAILED, "request expired")),
    ([cond("Provisioned", "True"), cond("BookingExpired", "True", "not used in time")],
     ProvisioningState(Stage.EXPIRED, "not used in time")),
])
def test_the_deciding_condition_gives_the_stage_and_the_autoscalers_words(
        conditions: list[dict[str, Any]], expected: ProvisioningState) -> None:
    assert provisioning_state({"status": {"conditions": conditions}}) == expected


def test_a_request_without_status_is_asked() -> None:
    assert provisioning_state({"metadata": {"name": "gang-train"}}).stage is Stage.ASKED


class Api:
    """Answers every request; records them; pods are found, ``refuse`` paths get a 500."""

    def __init__(self, refuse: str = "") -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.refuse = refuse

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        self.calls.append((method, path, query or body))
        if self.refuse and self.refuse in path:
            return Response(500, b'{"message": "boom"}')
        if method == "GET":
            return Response(200, json.dumps({"spec": SPEC}).encode())
        return Response(201 if method == "POST" else 200, b"{}")


ASK = ScaleUp("ml/train", "a100", 4, (PodSet("worker", 4, PodRef("ml", "train-0", "u0")),))


def plan(*scale_ups: ScaleUp, pending: tuple[str, ...] = ()) -> CyclePlan:
    return CyclePlan(now=0.0, scale_ups=scale_ups,
                     pending={g: PendingReason(ReasonCategory.PLACEMENT, "no room")
                              for g in pending})


def test_a_scale_up_reads_a_member_then_writes_its_templates_then_the_request_once() -> None:
    api = Api()
    writer = ScaleUpWriter(api)
    writer.apply(plan(ASK, pending=("ml/train",)))
    writer.apply(plan(ASK, pending=("ml/train",)))
    assert [(m, p) for m, p, _ in api.calls] == [
        ("GET", "/api/v1/namespaces/ml/pods/train-0"),
        ("POST", "/api/v1/namespaces/ml/podtemplates"),
        ("POST", "/apis/autoscaling.x-k8s.io/v1/namespaces/ml/provisioningrequests"),
    ]


def test_a_placed_or_gone_gang_has_its_request_and_templates_deleted() -> None:
    api = Api()
    writer = ScaleUpWriter(api)
    writer.apply(plan(), existing=("ml/train", "ml/waits"))
    assert [(m, p, q) for m, p, q in api.calls] == [
        ("DELETE", "/apis/autoscaling.x-k8s.io/v1/namespaces/ml/provisioningrequests/"
                   "gang-train", None),
        ("DELETE", "/api/v1/namespaces/ml/podtemplates",
         {"labelSelector": f"{GANG_LABEL}=train"}),
        ("DELETE", "/apis/autoscaling.x-k8s.io/v1/namespaces/ml/provisioningrequests/"
                   "gang-waits", None),
        ("DELETE", "/api/v1/namespaces/ml/podtemplates",
         {"labelSelector": f"{GANG_LABEL}=waits"}),
    ]
    api.calls.clear()
    writer.apply(plan())
    assert api.calls == []  # withdrawn once


def test_a_still_pending_gang_keeps_its_request_even_when_no_longer_asked_for() -> None:
    api = Api()
    ScaleUpWriter(api).apply(plan(pending=("ml/train",)), existing=("ml/train",))
    assert api.calls == []


def test_a_refused_write_is_tried_again_next_cycle() -> None:
    api = Api(refuse="provisioningrequests")
    writer = ScaleUpWriter(api)
    writer.apply(plan(ASK, pending=("ml/train",)))
    api.refuse = ""
    writer.apply(plan(ASK, pending=("ml/train",)))
    posts = [p for m, p, _ in api.calls if m == "POST" and p.endswith("provisioningrequests")]
    assert len(posts) == 2


def test_the_members_are_marked_as_the_requests_consumers_once_each_new_ones_too() -> None:
    """Unmarked, the autoscaler would also scale up for them as ordinary unschedulable pods:
    for part of the gang, up to the group's maximum."""
    api = Api()
    writer = ScaleUpWriter(api)
    first = (PodRef("ml", "train-0", "u0"), PodRef("ml", "train-1", "u1"))
    asked = plan(ASK, pending=("ml/train",))
    writer.apply(replace(asked, members={"ml/train": Members(first)}))
    recreated = (first[0], PodRef("ml", "train-1", "u1-again"))
    writer.apply(replace(asked, members={"ml/train": Members(recreated)}))
    patches = [(p, body) for m, p, body in api.calls if m == "PATCH"]
    marks = {"metadata": {"annotations": {CONSUME_ANNOTATION: "gang-train",
                                          CLASS_ANNOTATION: ATOMIC_SCALE_UP_CLASS}}}
    assert patches == [("/api/v1/namespaces/ml/pods/train-0", marks),
                       ("/api/v1/namespaces/ml/pods/train-1", marks),
                       ("/api/v1/namespaces/ml/pods/train-1", marks)]


def test_no_member_is_marked_while_its_request_is_not_made() -> None:
    api = Api(refuse="provisioningrequests")
    members = {"ml/train": Members((PodRef("ml", "train-0", "u0"),))}
    ScaleUpWriter(api).apply(replace(plan(ASK, pending=("ml/train",)), members=members))
    assert [p for m, p, _ in api.calls if m == "PATCH"] == []


def test_the_members_of_a_held_gang_get_the_autoscalers_scale_up_delay_once() -> None:
    api = Api()
    writer = ScaleUpWriter(api)
    held = replace(plan(pending=("ml/train",)), scale_up_held=("ml/train",),
                   members={"ml/train": Members((PodRef("ml", "train-0", "u0"),))})
    writer.apply(held)
    writer.apply(held)
    assert [(m, p, body) for m, p, body in api.calls] == [
        ("PATCH", "/api/v1/namespaces/ml/pods/train-0",
         {"metadata": {"annotations": {SCALE_UP_DELAY_ANNOTATION: HOLD_DELAY}}})]
