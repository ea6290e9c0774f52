"""The cluster side of the kwok benchmarks (``bench_versus``, ``bench_scale``, ``bench_kai``,
``bench_stream``): a dev cluster whose nodes kwok runs, the contenders' processes, a watch
that stamps every bind, and per-process CPU and memory.

Why apart: each benchmark script then reads as the experiment it runs. Why kwok nodes rather
than bare Node objects: they are what the field's published scale tests run on (KAI-Scheduler,
Kueue, kube-scheduler's own), with Leases renewed and pods taken to Running, so the apiserver
carries the load a real cluster puts on it while the schedulers work.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_scheduler_setup import GPU, POOL, cpu_seconds

from scheduler.kube.client import KubeClient, TransportError, connect
from scheduler.kube.read import informer
from scheduler.tools.devcluster import build, certs, controllers, liveness, procs
from scheduler.tools.devcluster.cluster import DevCluster
from scheduler.tools.devcluster.nodes import (
    FAKE_NODE_LABEL,
    KWOK_ANNOTATION,
    KWOK_VALUE,
    is_ready,
    node_ip,
    status_body,
)

POOL_LABEL = "gangscheduler.io/pool"


def stream_arguments(parser: argparse.ArgumentParser, *, rate: float, runtime: float,
                     duration: float) -> None:
    """The options of a stream of gangs on kwok nodes (``bench_stream``, ``bench_soak``)."""
    parser.add_argument("--state-dir", help="a running dev cluster (default: start one)")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--gang-size", type=int, default=8)
    parser.add_argument("--rate", type=float, default=rate, help="gangs created per second")
    parser.add_argument("--runtime", type=float, default=runtime,
                        help="seconds each pod runs once bound")
    parser.add_argument("--duration", type=float, default=duration,
                        help="seconds of arrivals")


def load() -> str:
    """The machine's load averages, printed beside every figure (the machine is shared)."""
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def say(line: str) -> None:
    """Progress on stderr, so that stdout has only the figures."""
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


@contextmanager
def kwok_cluster(state_dir: str | None,
                 node_liveness: liveness.NodeLiveness = liveness.STANDARD,
                 ) -> Iterator[DevCluster]:
    """A running dev cluster: the one in *state_dir*, or a throwaway one (no training
    operators: nothing here needs them; its nodes as alive as *node_liveness* says) stopped
    on exit."""
    if state_dir:
        cluster = DevCluster(Path(state_dir))
        if not cluster.running():
            raise SystemExit(f"no running dev cluster in {state_dir}")
        assert cluster.state is not None
        if cluster.state.node_liveness != node_liveness.name:
            say(f"note: the cluster in {state_dir} runs node liveness "
                f"{cluster.state.node_liveness!r}, not {node_liveness.name!r}")
        yield cluster
        return
    with tempfile.TemporaryDirectory(prefix="bench-kwok-") as tmp:
        cluster = DevCluster(Path(tmp), owned=True)
        # No fake DRA driver: a ResourceSlice write per node would compete with what is
        # measured, and no benchmark here claims a device.
        cluster.up(log=lambda line: say(f"dev-cluster: {line}"), training_operators=False,
                   node_liveness=node_liveness, dra_devices=False)
        try:
            yield cluster
        finally:
            cluster.down(log=lambda line: None)


@contextmanager
def kwok_session(state_dir: str | None, threads: int,
                 pool_maxsize: int) -> Iterator[tuple[DevCluster, KubeClient, ThreadPoolExecutor]]:
    """``kwok_cluster(state_dir)`` with a client of *pool_maxsize* connections and a pool of
    *threads* workers, both closed on exit (the contender benchmarks' one session)."""
    with kwok_cluster(state_dir) as cluster:
        client = connect(str(cluster.kubeconfig), pool_maxsize=pool_maxsize)
        pool = ThreadPoolExecutor(max_workers=threads)
        try:
            yield cluster, client, pool
        finally:
            pool.shutdown()
            client.close()


def create_nodes(client: KubeClient, names: Sequence[str], gpus: int,
                 pool: ThreadPoolExecutor, labels: dict[str, str] | None = None,
                 timeout_s: float | None = None) -> None:
    """kwok nodes with *gpus* GPUs, 64 CPUs and 512 GiB each, in the bench pool; returns once
    all are Ready and the node lifecycle controller has lifted ``not-ready`` (by default
    allowing a second per node, at least 10 minutes).

    Each node is one POST that carries its status, Ready condition included, as a kubelet
    registers its node (``scheduler.tools.devcluster.nodes`` writes the status apart, and kwok
    then reports the node Ready: two more writes per node, which at 5,000 nodes is minutes
    of this machine's apiserver). The ``not-ready`` taint the TaintNodesByCondition
    admission plugin puts on every new node is lifted by the node lifecycle controller, as
    on a real cluster."""
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti",
                   GPU: str(gpus)}

    def create(item: tuple[int, str]) -> None:
        index, name = item
        meta = {"name": name, "annotations": {KWOK_ANNOTATION: KWOK_VALUE},
                "labels": {"kubernetes.io/hostname": name, POOL_LABEL: POOL,
                           FAKE_NODE_LABEL: "true", **(labels or {})}}
        status = status_body(allocatable, node_ip(index), name)["status"]
        status["conditions"] = ready_conditions()
        reply = client.request("POST", "/api/v1/nodes", body={
            "apiVersion": "v1", "kind": "Node", "metadata": meta, "status": status})
        if not reply.ok and reply.status != 409:
            raise RuntimeError(f"node {name}: HTTP {reply.status}: {reply.message()}")

    t0 = time.monotonic()
    step = max(500, len(names) // 10)
    for done, _ in enumerate(pool.map(create, enumerate(names)), start=1):
        if done % step == 0 and done < len(names):
            say(f"{done} of {len(names)} nodes registered "
                f"({done / (time.monotonic() - t0):.0f}/s); {load()}")
    say(f"{len(names)} nodes registered in {time.monotonic() - t0:.1f}s; {load()}")
    wanted = set(names)
    deadline = time.monotonic() + (timeout_s if timeout_s is not None else max(600, len(names)))
    while True:
        ready = {n["metadata"]["name"] for n in list_pages(client, "/api/v1/nodes") if is_ready(n)}
        if not (missing := wanted - ready):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(missing)} of {len(wanted)} nodes not Ready")
        say(f"{len(wanted) - len(missing)} of {len(wanted)} nodes Ready; {load()}")
        # Each look lists every node: a few MB at thousands of nodes, so not too often.
        time.sleep(min(10.0, 1.0 + len(names) / 500))


def bench_nodes(client: KubeClient, args: argparse.Namespace, pool: ThreadPoolExecutor,
                run: str, timeout_s: float | None = None) -> float | None:
    """The benchmarks' nodes: ``--nodes`` kwok nodes of ``--gpus`` GPUs named
    ``kwok-<run>-<i>``, created and waited for, unless ``--existing-nodes`` says a previous
    run on this ``--state-dir`` cluster left them; returns the seconds they took to be Ready
    (None when none were created)."""
    if getattr(args, "existing_nodes", False):
        return None
    t0 = time.monotonic()
    create_nodes(client, [f"kwok-{run}-{i:05d}" for i in range(args.nodes)], args.gpus, pool,
                 timeout_s=timeout_s)
    took = time.monotonic() - t0
    say(f"{args.nodes} kwok nodes Ready in {took:.1f}s; {load()}")
    return took


def ready_conditions() -> list[dict[str, str]]:
    """The conditions a healthy kubelet reports: Ready, and no memory, disk or PID
    pressure."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    healthy = (("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
               ("MemoryPressure", "False", "KubeletHasSufficientMemory", "enough memory"),
               ("DiskPressure", "False", "KubeletHasNoDiskPressure", "no disk pressure"),
               ("PIDPressure", "False", "KubeletHasSufficientPID", "enough PIDs"))
    return [{"type": kind, "status": status, "reason": reason, "message": message,
             "lastHeartbeatTime": now, "lastTransitionTime": now}
            for kind, status, reason, message in healthy]


def create_job(client: KubeClient, namespace: str, queue: str, names: Sequence[str], gpus: int,
               pool: ThreadPoolExecutor, group: str | None = None,
               annotations: dict[str, str] | None = None) -> float:
    """Pods of *gpus* GPUs and one CPU for gang-scheduler in *queue*, created concurrently,
    with their PodGroup first when *group* names one; returns when the last POST returned
    (the benchmarks' "last member created")."""
    if group:
        body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": group}, "spec": {"minMember": len(names)}}
        reply = client.request(
            "POST", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups",
            body=body)
        if not reply.ok:
            raise RuntimeError(f"podgroup {group}: HTTP {reply.status}: {reply.message()}")

    def create(name: str) -> float:
        labels = {"gangscheduler.io/queue": queue}
        if group:
            labels["scheduling.x-k8s.io/pod-group"] = group
        meta = {"name": name, "labels": labels, "annotations": annotations or {}}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"schedulerName": "gang-scheduler", "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "registry.invalid/x",
                                         "resources": {"requests": {"cpu": "1", GPU: str(gpus)},
                                                       "limits": {GPU: str(gpus)}}}]}}
        reply = client.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)
        if not reply.ok:
            raise RuntimeError(f"pod {name}: HTTP {reply.status}: {reply.message()}")
        return time.time()

    return max(pool.map(create, names))


def list_pages(client: KubeClient, path: str, page: int = 2000) -> Iterator[dict[str, Any]]:
    """Every object at *path*, listed in pages."""
    cont: str | None = None
    while True:
        body = client.get_json(path, {"limit": page, "continue": cont})
        yield from body.get("items") or ()
        cont = body["metadata"].get("continue")
        if not cont:
            return


def create_namespace(client: KubeClient, name: str) -> None:
    reply = client.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    if not reply.ok and reply.status != 409:
        raise RuntimeError(f"namespace {name}: HTTP {reply.status}: {reply.message()}")


def delete_pods(client: KubeClient, namespace: str, pool: ThreadPoolExecutor,
                timeout_s: float = 600.0, collection: bool = False) -> None:
    """Delete every pod of *namespace*, grace 0, from the pool's threads (one
    ``deletecollection`` of 10,000 pods takes minutes on a loaded apiserver), and wait until
    none is left, so the next contender starts on a cluster of the same size. With
    *collection*, one ``deletecollection`` goes first (one request for a few thousand pods is
    quicker than as many DELETEs) and the per-pod loop only mops up and verifies."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    if collection:
        try:  # the reply lists every deleted pod (MBs): a broken read leaves the pods deleted
            reply = client.request("DELETE", path, query={"gracePeriodSeconds": 0}, timeout=600)
            if not reply.ok:
                say(f"deletecollection {namespace}/pods: HTTP {reply.status}: {reply.message()}")
        except TransportError as exc:
            say(f"deletecollection {namespace}/pods: {exc}; the per-pod loop finishes it")

    def delete(name: str) -> None:
        reply = client.request("DELETE", f"{path}/{name}", query={"gracePeriodSeconds": 0})
        if not reply.ok and reply.status != 404:
            say(f"delete pod {namespace}/{name}: HTTP {reply.status}: {reply.message()}")

    deadline = time.monotonic() + timeout_s
    while names := [p["metadata"]["name"] for p in list_pages(client, path)]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(names)} pods of {namespace} left after {timeout_s:.0f}s")
        list(pool.map(delete, names))


class BindWatch:
    """A watch of one namespace's pods that stamps (epoch seconds) when each pod was first
    seen with a node; the benchmark's view of "bound", the same for every contender. It also
    stamps when a pod was first reported ``PodScheduled=False`` reason ``Unschedulable``."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.bound: dict[str, float] = {}  # pod name -> when its bind was seen
        self.unschedulable: dict[str, float] = {}  # pod name -> when it was first so marked
        self.deleted: dict[str, float] = {}  # pod name -> when its deletion was seen
        self._changed = threading.Condition()
        self._informer = informer.Informer(client, informer.PODS.in_namespace(namespace),
                                           self._on_event)

    def _on_event(self, event: informer.EventType, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        now = time.time()
        with self._changed:
            if event is informer.EventType.DELETED:
                self.deleted.setdefault(name, now)
            elif (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
                self.bound[name] = now
            elif name not in self.unschedulable and _unschedulable(obj):
                self.unschedulable[name] = now
            else:
                return
            self._changed.notify_all()

    def __enter__(self) -> BindWatch:
        self._informer.start()
        if not self._informer.wait_for_sync(120):
            raise TimeoutError("the benchmark's pod watch did not sync")
        return self

    def __exit__(self, *exc: object) -> None:
        self._informer.stop()

    def wait(self, names: Sequence[str] | int, stall_s: float,
             alive: Any = None) -> bool:
        """Until every pod named (or that many pods) is bound; False when no new bind came
        for *stall_s* seconds or ``alive()`` turned false."""
        def done() -> bool:
            if isinstance(names, int):
                return len(self.bound) >= names
            return all(n in self.bound for n in names)

        with self._changed:
            seen, since = len(self.bound), time.monotonic()
            while not done():
                if alive is not None and not alive():
                    return False
                if len(self.bound) != seen:  # progress: the stall clock starts again
                    seen, since = len(self.bound), time.monotonic()
                left = stall_s - (time.monotonic() - since)
                if left <= 0:
                    return False
                self._changed.wait(min(left, 1.0))
            return True

    def span(self) -> tuple[float, float]:
        """(first bind, last bind) in epoch seconds."""
        with self._changed:
            times = list(self.bound.values())
        return min(times), max(times)


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or ())


@dataclass(frozen=True, slots=True)
class Usage:
    """What a process used: CPU seconds (user + system), its peak and current resident
    memory."""

    cpu_s: float
    peak_rss_mib: float
    rss_mib: float = float("nan")


def usage(pid: int) -> Usage:
    """CPU so far, ``VmHWM`` (peak RSS) and ``VmRSS`` of a live process, from ``/proc``; NaN
    for a process that is gone (its figures went with it: the caller says it exited)."""
    memory = {"VmHWM": 0.0, "VmRSS": 0.0}
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cpu = cpu_seconds(pid)
    except FileNotFoundError:
        return Usage(float("nan"), float("nan"), float("nan"))
    for line in status.splitlines():
        key = line.split(":", 1)[0]
        if key in memory:
            memory[key] = int(line.split()[1]) / 1024
    return Usage(cpu, memory["VmHWM"], memory["VmRSS"])


def cluster_pids(cluster: DevCluster) -> dict[str, int]:
    """The dev cluster's own processes by name (apiserver, etcd, kwok, ...)."""
    assert cluster.state is not None
    return {p.name: p.pid for p in cluster.state.processes if procs.is_alive(p)}


def cluster_cpu(cluster: DevCluster) -> dict[str, float]:
    out = {}
    for name, pid in cluster_pids(cluster).items():
        try:
            out[name] = cpu_seconds(pid)
        except OSError:
            continue
    return out


def start_kube_scheduler(cluster: DevCluster, name: str, scheduler_name: str,
                         qps: float | None, burst: int | None) -> procs.ManagedProcess:
    """A second kube-scheduler (the cluster's own binary) with one profile, *scheduler_name*,
    and the given client limits (None: its shipped 50/100); not waited for."""
    st = cluster.state
    assert st is not None
    return controllers.start_scheduler(
        build.KUBE_SCHEDULER.binary(), st.server, certs.CertPaths.under(cluster.state_dir / "pki"),
        cluster.state_dir, True, build.KUBE_SCHEDULER.version, name=name,
        scheduler_name=scheduler_name, qps=qps, burst=burst, wait=False)
