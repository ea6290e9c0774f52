"""The live reader of node groups and ProvisioningRequests: quiet when off, tolerant of no CRD."""

from __future__ import annotations

import json
from typing import Any

import yaml

from scheduler.kube.client import Response
from scheduler.kube.read.node_groups import GROUP_NAME_ANNOTATION, MAX_COUNT_ANNOTATION
from scheduler.kube.read.provisioning_state import GANG_LABEL
from scheduler.kube.read.scale_up_feed import ScaleUpFeed
from scheduler.model.node_groups import ProvisioningState, Stage

TEMPLATE = {"metadata": {"name": "a100-template",
                         "annotations": {GROUP_NAME_ANNOTATION: "a100",
                                         MAX_COUNT_ANNOTATION: "4"},
                         "labels": {"gangscheduler.io/pool": "a100"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "pods": "110"}}}
CONFIGMAP = {"data": {"templates": yaml.safe_dump({"kind": "List", "items": [TEMPLATE]})}}
REQUEST = {"metadata": {"name": "gang-train", "namespace": "ml", "labels": {GANG_LABEL: "train"}},
           "status": {"conditions": [{"type": "Failed", "status": "True",
                                      "message": "no capacity"}]}}


class Api:
    """Serves *objects* by path (others: 404) and records the paths asked for."""

    def __init__(self, objects: dict[str, Any]) -> None:
        self.objects = objects
        self.paths: list[str] = []

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        self.paths.append(path)
        if path not in self.objects:
            return Response(404, b'{"message": "not found"}')
        return Response(200, json.dumps(self.objects[path]).encode())


CM_PATH = "/api/v1/namespaces/kube-system/configmaps/kwok-provider-templates"
PR_PATH = "/apis/autoscaling.x-k8s.io/v1/provisioningrequests"
NODES: dict[str, Any] = {"/api/v1/nodes": {"items": []}}


def test_no_pool_scales_up_so_nothing_is_read() -> None:
    api = Api({})
    feed = ScaleUpFeed(api, frozenset)
    assert feed.poll() is False
    assert api.paths == [] and feed.node_groups() == () and feed.asked() == {}


def test_groups_from_the_templates_and_the_requests_stage_by_gang() -> None:
    api = Api({CM_PATH: CONFIGMAP, PR_PATH: {"items": [REQUEST]}, **NODES})
    feed = ScaleUpFeed(api, lambda: frozenset({"a100"}))
    assert feed.poll() is True
    (group,) = feed.node_groups()
    assert (group.name, group.size, group.max_size, group.pool) == ("a100", 0, 4, "a100")
    assert feed.asked() == {"ml/train": ProvisioningState(Stage.FAILED, "no capacity")}
    assert feed.listed() == ("ml/train",)
    view = feed.view
    assert feed.poll() is False  # nothing changed: the loop is not woken again
    assert feed.view is view  # and its wake-up mark stays the same


def test_without_the_crd_nothing_was_asked_and_the_groups_still_count() -> None:
    feed = ScaleUpFeed(Api({CM_PATH: CONFIGMAP, **NODES}), lambda: frozenset({"a100"}))
    feed.poll()
    assert len(feed.node_groups()) == 1 and feed.asked() == {}


def test_a_templates_key_that_is_no_list_keeps_the_last_view() -> None:
    api = Api({CM_PATH: {"data": {"templates": "just text"}}, **NODES})
    feed = ScaleUpFeed(api, lambda: frozenset({"a100"}))
    assert feed.poll() is False and feed.node_groups() == ()
