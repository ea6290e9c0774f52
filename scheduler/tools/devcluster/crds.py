"""Install the project's CustomResourceDefinitions (``deploy/crds/*.yaml``), and the
ProvisioningRequest CRD of cluster-autoscaler's pinned API module, and wait for them.

Why wait: a CRD is accepted before its REST endpoint serves; creating a PodGroup right after
creating the CRD fails with 404 until the ``Established`` condition is true.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from scheduler.tools.devcluster import build, rest
from scheduler.tools.devcluster.components import REPO_ROOT

CRD_DIR = REPO_ROOT / "deploy" / "crds"


def apply(api: client.ApiClient, directory: Path = CRD_DIR, timeout_s: float = 30.0) -> list[str]:
    """Create or replace every CRD in `directory`; returns their names once all are served."""
    documents = [doc for path in sorted(directory.glob("*.yaml"))
                 for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))]
    return apply_documents(api, documents, timeout_s)


def apply_provisioning_requests(api: client.ApiClient) -> list[str]:
    """The ProvisioningRequest CRD (``autoscaling.x-k8s.io``) as its pinned module ships it,
    so the apiserver validates gang-scheduler's scale-ups as a cluster with the autoscaler
    would (``build.AUTOSCALER_APIS``)."""
    documents = [doc for path in build.ensure_manifests(build.AUTOSCALER_APIS)
                 for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))]
    return apply_documents(api, documents)


def apply_documents(api: client.ApiClient, documents: list[Any],
                    timeout_s: float = 60.0) -> list[str]:
    """Create or replace the CRDs among `documents`; returns their names once all are served."""
    ext = client.ApiextensionsV1Api(api)
    names = [_create_or_replace(ext, doc) for doc in documents
             if doc and doc.get("kind") == "CustomResourceDefinition"]
    deadline = time.monotonic() + timeout_s
    for name in names:
        while not _established(ext, name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established after {timeout_s:.0f}s")
            time.sleep(0.1)
    return names


def _create_or_replace(ext: client.ApiextensionsV1Api, doc: dict[str, Any]) -> str:
    name = str(doc["metadata"]["name"])
    try:
        rest.call(ext.create_custom_resource_definition, doc)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        current = rest.call(ext.read_custom_resource_definition, name)
        doc = {**doc, "metadata": {**doc["metadata"],
                                   "resourceVersion": current["metadata"]["resourceVersion"]}}
        rest.call(ext.replace_custom_resource_definition, name, doc)
    return name


def _established(ext: client.ApiextensionsV1Api, name: str) -> bool:
    crd = rest.call(ext.read_custom_resource_definition, name)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
