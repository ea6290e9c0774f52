"""Start etcd and kube-apiserver on 127.0.0.1 and wait until they serve.

Why these flags: the control plane should behave like a production one wherever the scheduler
can tell the difference: TLS with client certificates, ``--authorization-mode=Node,RBAC``,
bound ServiceAccount tokens, and the default admission chain plus ``NodeRestriction``.

Admission plugins: none is disabled. Those that need a controller to finish their work get it
from the real kube-controller-manager (``controllers.py``): ``ServiceAccount`` (the
serviceaccount controller creates each namespace's ``default``), ``ResourceQuota`` (the quota
controller fills in ``status``), ``StorageObjectInUseProtection`` (the pv/pvc-protection
controllers remove their finalizers) and ``NamespaceLifecycle`` (the namespace controller
finishes deletions). ``TaintNodesByCondition`` puts ``node.kubernetes.io/not-ready`` on every
new Node, which the node lifecycle controller lifts once the node is Ready; that controller
does not run here (the fake nodes send no heartbeats), so the node helpers lift it themselves
(``nodes.py``).

``GANG_SCHEDULER_DEV_CLUSTER_DISABLE_ADMISSION`` (comma-separated) adds to
``--disable-admission-plugins`` for experiments.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from pathlib import Path

from scheduler.tools.devcluster import certs, gates, procs

SERVICE_CIDR = "10.0.0.0/24"
ISSUER = "https://kubernetes.default.svc.cluster.local"
ENABLE_ADMISSION = ("NodeRestriction",)  # on top of the defaults, as kubeadm does
DISABLE_ADMISSION_ENV = "GANG_SCHEDULER_DEV_CLUSTER_DISABLE_ADMISSION"
ETCD_READY_TIMEOUT_S = 30.0
APISERVER_READY_TIMEOUT_S = 90.0


def start_etcd(binary: Path, data_dir: Path, log_dir: Path, owned: bool
               ) -> tuple[procs.ManagedProcess, str]:
    """Single-member etcd on loopback ports; returns the process and its client URL.

    Plain HTTP on 127.0.0.1 is deliberate: it is a throwaway test store, only the apiserver
    talks to it, and TLS here would test nothing of ours. ``--unsafe-no-fsync`` because the
    data is discarded anyway and fsync dominates on slow CI disks.
    """
    return procs.start_listening(lambda: _start_etcd(binary, data_dir, log_dir, owned))


def _start_etcd(binary: Path, data_dir: Path, log_dir: Path, owned: bool
                ) -> tuple[procs.ManagedProcess, str]:
    client_port, peer_port = procs.free_port(), procs.free_port()
    client_url = f"http://127.0.0.1:{client_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    argv = [
        str(binary), "--name=dev", f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}", f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=dev={peer_url}", "--initial-cluster-state=new",
        "--unsafe-no-fsync", "--log-level=warn", "--quota-backend-bytes=2147483648",
    ]
    proc = procs.spawn("etcd", argv, log_dir / "etcd.log", owned)
    procs.wait_until(lambda: etcd_healthy(client_url), ETCD_READY_TIMEOUT_S,
                     "etcd /health", proc)
    return proc, client_url


def etcd_healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
            return bool(json.loads(reply.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


def apiserver_argv(binary: Path, port: int, etcd_url: str, pki: certs.CertPaths,
                   cert_dir: Path, version: str) -> list[str]:
    disabled = [p for p in os.environ.get(DISABLE_ADMISSION_ENV, "").split(",") if p]
    argv = [
        str(binary),
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
        f"--etcd-servers={etcd_url}",
        f"--tls-cert-file={pki.server_cert}", f"--tls-private-key-file={pki.server_key}",
        f"--client-ca-file={pki.ca_cert}", f"--cert-dir={cert_dir}",
        f"--service-account-issuer={ISSUER}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        f"--enable-admission-plugins={','.join(ENABLE_ADMISSION)}",
        "--allow-privileged=true", "--profiling=false", "--v=1",
        # The `kubernetes` Service's Endpoints may not point at loopback (validation rejects
        # 127.0.0.1), and nothing runs in-cluster here, so do not maintain them.
        "--endpoint-reconciler-type=none",
        # Kubernetes' own gang API (Workload, PodGroup), alpha/beta and off by default.
        gates.feature_gates_flag("kube-apiserver", version), gates.runtime_config_flag(version),
    ]
    if disabled:
        argv.append(f"--disable-admission-plugins={','.join(disabled)}")
    return argv


def start_apiserver(binary: Path, etcd_url: str, pki: certs.CertPaths, state_dir: Path,
                    owned: bool, version: str) -> tuple[procs.ManagedProcess, str]:
    """kube-apiserver on a free loopback port; returns once ``/readyz`` says ok."""
    return procs.start_listening(
        lambda: _start_apiserver(binary, etcd_url, pki, state_dir, owned, version))


def _start_apiserver(binary: Path, etcd_url: str, pki: certs.CertPaths, state_dir: Path,
                     owned: bool, version: str) -> tuple[procs.ManagedProcess, str]:
    port = procs.free_port()
    server = f"https://127.0.0.1:{port}"
    argv = apiserver_argv(binary, port, etcd_url, pki, state_dir / "apiserver-certs", version)
    proc = procs.spawn("kube-apiserver", argv, state_dir / "logs" / "kube-apiserver.log", owned)
    context = admin_ssl_context(pki)
    procs.wait_until(lambda: get(server, "/readyz", context) == "ok",
                     APISERVER_READY_TIMEOUT_S, "kube-apiserver /readyz", proc, interval_s=0.25)
    return proc, server


def admin_ssl_context(pki: certs.CertPaths) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    return context


def get(server: str, path: str, context: ssl.SSLContext) -> str | None:
    """Body of a GET as admin, or None when the server is not answering (yet)."""
    try:
        with urllib.request.urlopen(f"{server}{path}", context=context, timeout=5) as reply:
            return str(reply.read().decode())
    except urllib.error.HTTPError:
        return None
    except OSError:
        return None
