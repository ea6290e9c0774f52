"""Helpers of tests/e2e/test_dra_devcluster.py: claim and Job bodies, reading claims, and
keeping real objects as fixtures.

Why keep fixtures from a run: the converters from Kubernetes JSON to the device model (issue
35) must be tested against the shapes the apiserver really returns (defaults filled in,
``managedFields``, the allocation's ``nodeSelector``), not against shapes written by hand. With
``GANG_SCHEDULER_E2E_DRA_FIXTURES=1`` the test writes the objects it read back to
``tests/data/dra/``; they are committed, and a later run without the variable leaves them be.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kubernetes import client

from scheduler.tools.devcluster import dra, rest
from tests.e2e.cluster_api import ControlPlane

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "dra"
FIXTURES_ENV = "GANG_SCHEDULER_E2E_DRA_FIXTURES"
CLAIM = "gpu"  # the pod's name for its claim


def keep(name: str, obj: dict[str, Any]) -> None:
    """Write *obj* (as the apiserver returned it) to ``tests/data/dra/<name>.json`` when
    ``GANG_SCHEDULER_E2E_DRA_FIXTURES=1``."""
    if os.environ.get(FIXTURES_ENV, "").strip() != "1":
        return
    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / f"{name}.json").write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n",
                                           encoding="utf-8")


def exactly(device_class: str, count: int = 1, cel: str | None = None) -> dict[str, Any]:
    """A claim spec asking for *count* devices of *device_class* (and *cel*, if given)."""
    request: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if cel:
        request["selectors"] = [{"cel": {"expression": cel}}]
    return {"devices": {"requests": [{"name": CLAIM, "exactly": request}]}}


def create_template(cp: ControlPlane, namespace: str, name: str,
                    spec: dict[str, Any]) -> dict[str, Any]:
    body = {"apiVersion": dra.API_VERSION, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name}, "spec": {"spec": spec}}
    return rest.call(client.ResourceV1Api(cp.api).create_namespaced_resource_claim_template,
                     namespace, body)


def create_claim(cp: ControlPlane, namespace: str, name: str,
                 spec: dict[str, Any]) -> dict[str, Any]:
    body = {"apiVersion": dra.API_VERSION, "kind": "ResourceClaim",
            "metadata": {"name": name}, "spec": spec}
    return rest.call(client.ResourceV1Api(cp.api).create_namespaced_resource_claim,
                     namespace, body)


def claiming_pod_spec(node_selector: dict[str, str], scheduler_name: str,
                      template: str | None = None, claim: str | None = None) -> dict[str, Any]:
    """A pod spec whose one container uses claim ``gpu``: made from *template* per pod, or the
    existing ResourceClaim *claim*. No ``nvidia.com/gpu`` request: the device is the claim."""
    source = ({"resourceClaimTemplateName": template} if template
              else {"resourceClaimName": claim})
    return {
        "schedulerName": scheduler_name, "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0, "nodeSelector": node_selector,
        "resourceClaims": [{"name": CLAIM, **source}],
        "containers": [{"name": "main", "image": "registry.invalid/train:latest",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                      "claims": [{"name": CLAIM}]}}],
    }


def indexed_job(name: str, pods: int, pod_spec: dict[str, Any],
                labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"completionMode": "Indexed", "parallelism": pods, "completions": pods,
                     "backoffLimit": 0,
                     "template": {"metadata": {"labels": dict(labels or {})},
                                  "spec": pod_spec}}}


def claims(cp: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    return list(rest.call(client.ResourceV1Api(cp.api).list_namespaced_resource_claim,
                          namespace)["items"])


def read_claim(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return rest.call(client.ResourceV1Api(cp.api).read_namespaced_resource_claim, name,
                     namespace)


def results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    """The devices allocated to *claim* ([] while it has no allocation)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def reserved_for(claim: dict[str, Any]) -> list[str]:
    return [r["name"] for r in (claim.get("status") or {}).get("reservedFor") or []
            if r.get("resource") == "pods"]


def devices_of(cp: ControlPlane, node: str) -> dict[str, dict[str, Any]]:
    """The devices the fake driver published for *node* (in all of its pool's slices: a
    MIG node has several), by name."""
    found = rest.call(client.ResourceV1Api(cp.api).list_resource_slice,
                      field_selector=f"spec.driver={dra.DRIVER},spec.nodeName={node}")
    return {d["name"]: d for s in sorted(found["items"], key=lambda s: s["metadata"]["name"])
            for d in s["spec"].get("devices") or ()}
