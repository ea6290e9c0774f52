"""What the provision step reads from the cluster: the autoscaler's node groups and its answers.

The cycle's ``decide`` takes ``node_groups`` and ``asked`` (``scheduler.decide.scale_up``); this
reader keeps both, polled on its own thread while some pool may scale up
(``spec.scaleUp.pools`` of the SchedulerPolicy), and nothing at all otherwise: the default
cluster pays no request for a feature it does not use.

- Node groups: the kwok cloud provider's templates, a ``List`` of Nodes under the key
  ``templates`` of the ConfigMap ``kube-system/kwok-provider-templates`` (the provider's
  ``readNodesFrom: configmap``), sized by the nodes that carry each group's name
  (``scheduler.kube.read.node_groups``). No ConfigMap: no groups, nothing to ask for.
- Answers: the ProvisioningRequests gang-scheduler made (labelled with their gang), in every
  namespace. The CRD is optional: while ``autoscaling.x-k8s.io/v1`` is not served (HTTP 404)
  nothing was asked, and the reader tries again on the next poll, so installing the CRD later
  needs no restart.

A poll that changed what the decision sees calls *refreshed* (the loop's wake-up), so a gang's
reason quotes the autoscaler's new answer without waiting for another change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import structlog
import yaml

from scheduler.kube.client import ApiError, Requester, TransportError
from scheduler.kube.read.node_groups import node_groups
from scheduler.kube.read.provisioning_state import API_VERSION, GANG_LABEL, provisioning_state
from scheduler.model.node_groups import NodeGroup, ProvisioningState
from scheduler.model.nodes import NodeLabelConfig

log = structlog.get_logger()

TEMPLATES_CONFIGMAP = ("kube-system", "kwok-provider-templates")
TEMPLATES_KEY = "templates"
DEFAULT_POLL_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class ScaleUpView:
    """One poll's reading: the groups and, by gang id, the requests' stages."""

    groups: tuple[NodeGroup, ...] = ()
    asked: Mapping[str, ProvisioningState] = field(default_factory=dict)


class ScaleUpFeed:
    """Polls the node groups and the ProvisioningRequests while *pools* () is not empty."""

    def __init__(self, client: Requester, pools: Callable[[], frozenset[str]],
                 label_config: NodeLabelConfig | None = None, *,
                 interval: float = DEFAULT_POLL_SECONDS,
                 refreshed: Callable[[], None] | None = None) -> None:
        self.client, self.pools, self.label_config = client, pools, label_config
        self.interval, self.refreshed = interval, refreshed
        self.view = ScaleUpView()  # replaced whole: readers on other threads see one poll's

    # What the loop and the actuator read ----------------------------------------------------
    def node_groups(self) -> tuple[NodeGroup, ...]:
        return self.view.groups

    def asked(self) -> Mapping[str, ProvisioningState]:
        return self.view.asked

    def listed(self) -> tuple[str, ...]:
        """Gangs with a request on the apiserver (made before a restart, too)."""
        return tuple(self.view.asked)

    # Polling --------------------------------------------------------------------------------
    def poll(self) -> bool:
        """Read once (nothing when no pool may scale up); True if the view changed."""
        if not self.pools():
            view = ScaleUpView()
        else:
            try:
                view = ScaleUpView(self._groups(), self._asked())
            except (ApiError, TransportError, ValueError, yaml.YAMLError) as error:
                log.warning("scale_up_feed_unread", error=str(error))
                return False
        if view == self.view:
            return False
        self.view = view  # a new object only on a change: the loop's wake-up compares them
        return True

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if self.poll() and self.refreshed is not None:
                self.refreshed()
            stop.wait(self.interval)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="scale-up-feed",
                                  daemon=True)
        thread.start()
        return thread

    def _get(self, path: str, query: Mapping[str, Any] | None = None) -> Any | None:
        """The object at *path*, or None when the apiserver has none (HTTP 404)."""
        response = self.client.request("GET", path, query=query)
        if response.status == HTTPStatus.NOT_FOUND:
            return None
        if not response.ok:
            raise ApiError("GET", path, response)
        return response.json()

    def _groups(self) -> tuple[NodeGroup, ...]:
        namespace, name = TEMPLATES_CONFIGMAP
        configmap = self._get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        raw = ((configmap or {}).get("data") or {}).get(TEMPLATES_KEY)
        if not raw:
            return ()
        loaded = yaml.safe_load(raw) or {}
        templates = loaded.get("items") if isinstance(loaded, dict) else None
        if not isinstance(templates, list):
            raise ValueError(f"configmap {namespace}/{name}: data.{TEMPLATES_KEY} must be a "
                             f"List of Nodes (kind: List, items: [...])")
        nodes = (self._get("/api/v1/nodes") or {}).get("items") or []
        return node_groups(templates, nodes, self.label_config)

    def _asked(self) -> dict[str, ProvisioningState]:
        listed = self._get(f"/apis/{API_VERSION}/provisioningrequests",
                           {"labelSelector": GANG_LABEL})
        asked = {}
        for request in (listed or {}).get("items") or []:  # None: the CRD is not installed
            meta = request.get("metadata") or {}
            gang = (meta.get("labels") or {}).get(GANG_LABEL)
            if gang:
                asked[f"{meta.get('namespace')}/{gang}"] = provisioning_state(request)
        return dict(sorted(asked.items()))
