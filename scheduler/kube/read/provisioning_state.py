"""Where a gang's ProvisioningRequest stands, read from the conditions the autoscaler sets.

The autoscaler (1.31, class ``best-effort-atomic-scale-up``) answers a request with
``Provisioned=True`` (the nodes are being added, or are there) or ``Provisioned=False`` (no node
group can take all the pods now: "Capacity is not found, CA will try to find it later."); it
sets ``Failed=True`` when it gives up (the request expired unprovisioned, or its pods could not
be made). The deciding condition's message is what the gang's pending reason quotes, so the user
reads the autoscaler's own words. ``BookingExpired`` or ``CapacityRevoked`` mean the nodes were
not used in time and are no longer held for the gang.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.model.node_groups import ProvisioningState, Stage

API_VERSION = "autoscaling.x-k8s.io/v1"
#: Marks the objects gang-scheduler made for a gang, so that its own are found (by the feed,
#: and by the writer to delete them).
GANG_LABEL = "gangscheduler.io/gang"

#: The conditions that end a request, first match wins: a failure outweighs an old success.
_ENDINGS = (("Failed", Stage.FAILED), ("CapacityRevoked", Stage.EXPIRED),
            ("BookingExpired", Stage.EXPIRED), ("Provisioned", Stage.PROVISIONED))


def provisioning_state(request: Mapping[str, Any]) -> ProvisioningState:
    """The stage of one ProvisioningRequest object (as the apiserver returns it)."""
    conditions = (request.get("status") or {}).get("conditions") or []
    true = {c.get("type"): str(c.get("message") or "") for c in conditions
            if c.get("status") == "True"}
    for kind, stage in _ENDINGS:
        if kind in true:
            return ProvisioningState(stage, true[kind])
    for c in conditions:
        if c.get("type") == "Provisioned" and c.get("status") == "False":
            return ProvisioningState(Stage.NOT_FOUND, str(c.get("message") or ""))
    return ProvisioningState(Stage.ASKED)
