"""Kubeconfigs for the dev cluster: the admin identity, and minted ServiceAccount identities.

Why mint tokens: the scheduler will run as a ServiceAccount with the RBAC rules in ``deploy/``,
and tests must prove those rules are enough (and not more). The TokenRequest API issues a
short-lived, audience-bound token for any ServiceAccount without the legacy token Secrets, which
need kube-controller-manager. Kubeconfigs embed their certificates so they can be copied around.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from scheduler.tools.devcluster import certs

CLUSTER_NAME = "gang-scheduler-dev"


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


def _document(server: str, ca: Path, user: str, credentials: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER_NAME, "cluster": {
            "server": server, "certificate-authority-data": _b64(ca)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": f"{user}@{CLUSTER_NAME}",
                      "context": {"cluster": CLUSTER_NAME, "user": user}}],
        "current-context": f"{user}@{CLUSTER_NAME}",
        "preferences": {},
    }


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    path.chmod(0o600)  # it contains credentials
    return path


def write_client(path: Path, server: str, pki: certs.CertPaths, stem: str) -> Path:
    """A kubeconfig for the client certificate of identity `stem` (a key of `certs.CLIENTS`)."""
    cert, key = pki.client(stem)
    return _write(path, _document(server, pki.ca_cert, certs.CLIENTS[stem].user, {
        "client-certificate-data": _b64(cert),
        "client-key-data": _b64(key),
    }))


def write_admin(path: Path, server: str, pki: certs.CertPaths) -> Path:
    """A kubeconfig for the `system:masters` client certificate."""
    return write_client(path, server, pki, "admin")


def write_token(path: Path, server: str, ca: Path, user: str, token: str) -> Path:
    """A kubeconfig that authenticates with a bearer token (e.g. a minted ServiceAccount one)."""
    return _write(path, _document(server, ca, user, {"token": token}))


def api_client(kubeconfig: Path) -> client.ApiClient:
    """A fresh client for one kubeconfig, never touching the process-wide default config."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


def mint_service_account_token(api: client.ApiClient, namespace: str, name: str,
                               seconds: int = 3600, create: bool = False) -> str:
    """Issue a token for ServiceAccount `namespace/name` through the TokenRequest API.

    With `create`, the namespace and the ServiceAccount are created first when missing, which
    is what a test usually wants.
    """
    core = client.CoreV1Api(api)
    if create:
        _create_if_missing(lambda: core.create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))))
        _create_if_missing(lambda: core.create_namespaced_service_account(
            namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))))
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
    )
    reply = core.create_namespaced_service_account_token(name, namespace, request)
    assert reply.status is not None, "TokenRequest reply without status"
    return str(reply.status.token)


def _create_if_missing(create: Any) -> None:
    try:
        create()
    except client.ApiException as exc:
        if exc.status != 409:
            raise
