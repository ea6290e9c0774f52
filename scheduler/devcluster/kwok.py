"""Start kwok, the fake nodes' kubelets: node status and Leases, and the pod lifecycle.

Why kwok rather than a kubelet of our own: it is what Kueue, KAI-Scheduler and Volcano run their
own scale tests on, it renews node Leases (so the real node lifecycle controller can tell a live
node from a dead one, and a node failure can be tested end to end), and the lifecycle is data
(``kwok-stages.yaml``: Running, finishing after ``gangscheduler.io/simulated-runtime`` with the
exit code of ``gangscheduler.io/simulated-exit-code``, termination that takes the pod's whole
grace period) rather than code to maintain.

What kwok does not do that a kubelet does: it admits every pod bound to its node, even one that
does not fit; the e2e tests assert that never happens instead (tests/e2e/capacity.py). kwok runs
with its own client certificate (user ``kwok-controller``) in group ``system:masters``: it acts
for every fake node at once, which the Node authorizer's one-identity-per-node model cannot
express.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from scheduler.devcluster import certs, kubeconfig, nodes, procs

STAGES = Path(__file__).with_name("kwok-stages.yaml")
POD_CIDR = "10.64.0.0/12"
LEASE_SECONDS = 40  # the kubelet's default; kwok renews a quarter of the way through
READY_TIMEOUT_S = 30.0


def start_kwok(binary: Path, server: str, pki: certs.CertPaths, state_dir: Path,
               owned: bool) -> procs.ManagedProcess:
    """kwok managing the nodes annotated ``kwok.x-k8s.io/node: fake``; returns once it
    serves ``/healthz``."""
    name = "kwok"
    client = kubeconfig.write_client(state_dir / "kubeconfigs" / f"{name}.kubeconfig", server,
                                     pki, name)
    port = procs.free_port()
    argv = [
        str(binary), f"--kubeconfig={client}", f"--config={STAGES}",
        f"--manage-nodes-with-annotation-selector={nodes.KWOK_ANNOTATION}={nodes.KWOK_VALUE}",
        f"--node-lease-duration-seconds={LEASE_SECONDS}", f"--cidr={POD_CIDR}",
        f"--server-address=127.0.0.1:{port}",
    ]
    proc = procs.spawn(name, argv, state_dir / "logs" / f"{name}.log", owned)
    procs.wait_until(lambda: _healthy(port), READY_TIMEOUT_S, "kwok /healthz", proc,
                     interval_s=0.1)
    return proc


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
            return bool(reply.read().decode() == "ok")
    except OSError:
        return False
