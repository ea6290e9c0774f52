"""Differential testing against the real kube-scheduler: which nodes may a pod go to?

kube-scheduler reports only the node it picked. To read its *whole* feasible set, a second
kube-scheduler (profile ``diff-scheduler``) runs beside the dev cluster's with a filter
extender: kube-scheduler calls an extender with exactly the nodes that passed every in-tree
filter, and ours records them and answers that none passes (as unresolvable, so no
preemption is tried). The trial pod is therefore never bound and changes nothing; it ends
``PodScheduled=False``, which is when its answer is complete (when no node passes the
in-tree filters the extender is not called: the feasible set is empty).

The pure core's answer for the same pod comes from the scheduler's own code end to end:
the cluster read into a ``ClusterCache`` by ``oneshot.read_cluster``, the pod made a gang
by ``grouping.build_gang``, and ``placement.solve`` tried on each node alone.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from scheduler import placement
from scheduler.feed.grouping import GroupingConfig, build_gang
from scheduler.kube import client as kube_client
from scheduler.kube.oneshot import read_cluster
from scheduler.run.config import SchedulerConfig
from scheduler.tools.devcluster import build, procs
from scheduler.tools.devcluster.cluster import DevCluster

PROFILE = "diff-scheduler"


class _Recorder(BaseHTTPRequestHandler):
    calls: dict[str, list[str]]
    lock: threading.Lock

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        pod = body.get("Pod") or {}
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        names = [str(n) for n in body.get("NodeNames") or []]
        with self.lock:
            self.calls[uid] = names
        reply = {"NodeNames": [], "FailedAndUnresolvableNodes": {
            n: "differential test: recorded, not placed" for n in names}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


class FeasibleSets:
    """A recording extender and the kube-scheduler that calls it."""

    def __init__(self, cluster: DevCluster, work: Path, extra_args: Sequence[str] = ()) -> None:
        """*extra_args*: more flags for the kube-scheduler (e.g. the feature gates the dev
        cluster's own kube-scheduler runs with)."""
        self._calls: dict[str, list[str]] = {}
        self._lock = threading.Lock()

        class Handler(_Recorder):
            pass

        Handler.calls, Handler.lock = self._calls, self._lock
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        port = self._server.server_address[1]
        kubeconfig = cluster.state_dir / "kubeconfigs" / "kube-scheduler.kubeconfig"
        config = work / "diff-scheduler.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 100, "burst": 200},
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": PROFILE}],
            "extenders": [{"urlPrefix": f"http://127.0.0.1:{port}", "filterVerb": "filter",
                           "nodeCacheCapable": True, "weight": 1, "ignorable": False}],
        }, sort_keys=False), encoding="utf-8")
        binary = build.ensure(build.KUBE_SCHEDULER)
        self.process = procs.spawn("diff-scheduler", [
            str(binary), f"--config={config}", "--secure-port=0", "--v=1", *extra_args],
            work / "diff-scheduler.log", owned=True)

    def stop(self) -> None:
        procs.stop(self.process)
        self._server.shutdown()

    def recorded(self, uid: str) -> list[str] | None:
        with self._lock:
            return self._calls.get(uid)


def unschedulable(pod: Mapping[str, Any]) -> bool:
    """kube-scheduler has written its answer (PodScheduled=False)."""
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or [])


def kube_feasible(sets: FeasibleSets, pod: Mapping[str, Any]) -> frozenset[str]:
    """The nodes kube-scheduler's filters passed *pod* on (it must be unschedulable now)."""
    uid = str(pod["metadata"]["uid"])
    return frozenset(sets.recorded(uid) or ())


def core_feasible(kubeconfig: Path, pods: Iterable[Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    """uid -> the nodes ``placement.solve`` places each pod on, alone, as one-pod gangs."""
    client = kube_client.connect(str(kubeconfig))
    view = read_cluster(client, SchedulerConfig())
    snapshot = view.cache.cycle_input(time.time()).snapshot
    out: dict[str, frozenset[str]] = {}
    for obj in pods:
        uid = str(obj["metadata"]["uid"])
        info = view.cache.pod(uid)
        assert info is not None, f"pod {obj['metadata']['name']} not read back"
        entry = build_gang(f"{info.namespace}/{info.name}", [info], None, None,
                           GroupingConfig(scheduler_name=info.scheduler_name))
        assert entry.pending is not None, entry
        gang = entry.pending
        out[uid] = frozenset(
            n for n in snapshot.node_names
            if isinstance(placement.solve(gang, snapshot, placement.PlacementParams(
                allowed_nodes=frozenset((n,)))), placement.Placement))
    return out
