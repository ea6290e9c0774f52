"""Start kwok, the fake nodes' kubelets: node status and Leases, and the pod lifecycle.

Why kwok rather than a kubelet of our own: it is what Kueue, KAI-Scheduler and Volcano run their
own scale tests on, it renews node Leases (so the real node lifecycle controller can tell a live
node from a dead one, and a node failure can be tested end to end; ``liveness.SCALE`` turns
them off for thousands of nodes), and the lifecycle is data
(``kwok-stages.yaml``: Running, finishing after ``gangscheduler.io/simulated-runtime`` with the
exit code of ``gangscheduler.io/simulated-exit-code``, termination that takes the pod's whole
grace period) rather than code to maintain.

What kwok does not do that a kubelet does: it admits every pod bound to its node, even one that
does not fit; the e2e tests assert that never happens instead (tests/e2e/capacity.py). kwok runs
with its own client certificate (user ``kwok-controller``) in group ``system:masters``: it acts
for every fake node at once, which the Node authorizer's one-identity-per-node model cannot
express. kwok drops a stage whose write failed mid-request (an apiserver killed while it
wrote) and has no periodic resync, so each stage is one write and relies on kwok re-listing
after an apiserver restart to replay it; ``resync`` replays what an etcd restart lost (README,
"kwok drops a write that fails mid-request").
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import yaml

from scheduler.tools.devcluster import certs, kubeconfig, liveness, nodes, procs

STAGES = Path(__file__).with_name("kwok-stages.yaml")
# The annotations the stages read (a pod's simulated run) and the one they write (its start).
SIMULATED_RUNTIME = "gangscheduler.io/simulated-runtime"
SIMULATED_EXIT_CODE = "gangscheduler.io/simulated-exit-code"
SIMULATED_SHUTDOWN = "gangscheduler.io/simulated-shutdown"
SIMULATED_STARTED_AT = "gangscheduler.io/simulated-started-at"
HEARTBEAT_STAGE = "node-heartbeat"
POD_CIDR = "10.64.0.0/12"
READY_TIMEOUT_S = 30.0


def start_kwok(binary: Path, server: str, pki: certs.CertPaths, state_dir: Path,
               owned: bool,
               node_liveness: liveness.NodeLiveness = liveness.STANDARD) -> procs.ManagedProcess:
    """kwok managing the nodes annotated ``kwok.x-k8s.io/node: fake``, with the Leases and
    heartbeats of *node_liveness*; returns once it serves ``/healthz``."""
    name = "kwok"
    client = kubeconfig.write_client(state_dir / "kubeconfigs" / f"{name}.kubeconfig", server,
                                     pki, name)
    stages = stages_file(state_dir / "config", node_liveness)

    def start() -> procs.ManagedProcess:
        port = procs.free_port()
        argv = [
            str(binary), f"--kubeconfig={client}", f"--config={stages}",
            f"--manage-nodes-with-annotation-selector={nodes.KWOK_ANNOTATION}={nodes.KWOK_VALUE}",
            *node_liveness.kwok_flags(), f"--cidr={POD_CIDR}",
            f"--server-address=127.0.0.1:{port}",
        ]
        proc = procs.spawn(name, argv, state_dir / "logs" / f"{name}.log", owned)
        procs.wait_until(lambda: _healthy(port), READY_TIMEOUT_S, "kwok /healthz", proc,
                         interval_s=0.1)
        return proc

    return procs.start_listening(start)


def stages_file(config_dir: Path, node_liveness: liveness.NodeLiveness) -> Path:
    """The stages kwok runs: ``kwok-stages.yaml`` itself when its heartbeat delay is
    *node_liveness*'s (the standard one), else a copy under *config_dir* with only that
    delay changed, so every other stage stays the one the tests know."""
    documents = list(yaml.safe_load_all(STAGES.read_text(encoding="utf-8")))
    heartbeat = _stage(documents, HEARTBEAT_STAGE)
    wanted = {"durationMilliseconds": node_liveness.heartbeat_s * 1000,
              "jitterDurationMilliseconds": node_liveness.heartbeat_max_s * 1000}
    if heartbeat["spec"]["delay"] == wanted:
        return STAGES
    heartbeat["spec"]["delay"] = wanted
    config_dir.mkdir(parents=True, exist_ok=True)
    out = config_dir / f"kwok-stages-{node_liveness.name}.yaml"
    out.write_text(f"# {STAGES.name} with the {HEARTBEAT_STAGE} delay of node liveness "
                   f"{node_liveness.name!r} (scheduler/tools/devcluster/liveness.py)\n"
                   + yaml.safe_dump_all(documents, sort_keys=False), encoding="utf-8")
    return out


def _stage(documents: list[Any], name: str) -> dict[str, Any]:
    for doc in documents:
        if isinstance(doc, dict) and doc.get("metadata", {}).get("name") == name:
            return doc
    raise ValueError(f"{STAGES}: no stage named {name!r}")


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
            return bool(reply.read().decode() == "ok")
    except OSError:
        return False
