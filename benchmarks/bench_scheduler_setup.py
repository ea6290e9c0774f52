"""The cluster side of ``bench_scheduler.py``: nodes, pods, PodGroups, a Queue, the scheduler
process and what it logs and counts, and per-process CPU accounting.

Why apart: the benchmark script then reads as the experiment it runs.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from scheduler.kube.client import KubeClient
from scheduler.model import PodRef
from scheduler.tools.devcluster import procs
from scheduler.tools.devcluster.nodes import status_body

REPO = Path(__file__).resolve().parents[1]
POOL = "bench"
GPU = "nvidia.com/gpu"
MERGE = "application/merge-patch+json"


def create_nodes(client: KubeClient, names: list[str], gpus: int, pool: ThreadPoolExecutor) -> None:
    """Register, report Ready with allocatable, lift the not-ready taint: what a kubelet and
    the node lifecycle controller do (``scheduler.tools.devcluster.nodes``), minus the fake
    kubelet."""
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti",
                   GPU: str(gpus)}

    def create(item: tuple[int, str]) -> None:
        index, name = item
        labels = {"kubernetes.io/hostname": name, "gangscheduler.io/pool": POOL}
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        status = status_body(allocatable, f"10.9.{index // 250}.{index % 250 + 1}", name)
        for method, path, payload, ctype in (
                ("POST", "/api/v1/nodes", body, "application/json"),
                ("PATCH", f"/api/v1/nodes/{name}/status", status, MERGE),
                ("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, MERGE)):
            reply = client.request(method, path, body=payload, content_type=ctype)
            if not reply.ok and not (method == "POST" and reply.status == 409):
                raise RuntimeError(f"node {name}: {method} HTTP {reply.status}: {reply.message()}")

    list(pool.map(create, enumerate(names)))


def create_pods(client: KubeClient, namespace: str, count: int, pool: ThreadPoolExecutor, *,
                prefix: str, scheduler_name: str, gpus: int, gang_size: int = 0,
                queue: str = "", first: int = 0) -> list[PodRef]:
    """Pending pods ``<prefix>-<i>`` for i in ``first .. first + count - 1``; with
    *gang_size*, labelled into PodGroups ``g-<i // gang_size>``."""

    def create(i: int) -> PodRef:
        name = f"{prefix}-{i:06d}"
        labels = {"gangscheduler.io/queue": queue} if queue else {}
        if gang_size:
            labels["scheduling.x-k8s.io/pod-group"] = f"g-{i // gang_size:05d}"
        resources: dict[str, dict[str, str]] = {"requests": {"cpu": "1", "memory": "1Gi"}}
        if gpus:
            resources["requests"][GPU] = str(gpus)
            resources["limits"] = {GPU: str(gpus)}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
                "spec": {"schedulerName": scheduler_name, "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "registry.invalid/x",
                                         "resources": resources}]}}
        reply = client.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)
        if not reply.ok:
            raise RuntimeError(f"pod {name}: HTTP {reply.status}: {reply.message()}")
        return PodRef(namespace, name, reply.json()["metadata"]["uid"])

    return list(pool.map(create, range(first, first + count)))


def create_queue(client: KubeClient, name: str, namespace: str, gpus: int) -> None:
    """A Queue for *namespace* whose quota covers every GPU of the bench pool."""
    body = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"namespaces": [namespace],
                     "quotas": [{"pool": POOL, "nominal": {GPU: gpus}}]}}
    reply = client.request("POST", "/apis/gangscheduler.io/v1alpha1/queues", body=body)
    if not reply.ok:
        raise RuntimeError(f"queue {name}: HTTP {reply.status}: {reply.message()}")


def create_groups(client: KubeClient, namespace: str, count: int, size: int,
                  pool: ThreadPoolExecutor) -> None:
    def create(i: int) -> None:
        body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": f"g-{i:05d}"}, "spec": {"minMember": size}}
        reply = client.request(
            "POST", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups",
            body=body)
        if not reply.ok:
            raise RuntimeError(f"podgroup g-{i}: HTTP {reply.status}: {reply.message()}")

    list(pool.map(create, range(count)))


def metric(port: int, name: str) -> float:
    """One unlabelled sample from the scheduler's /metrics (0 when absent)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def unbound(client: KubeClient, namespace: str) -> int:
    """Pods of *namespace* without a node, by a paged list."""
    count, cont = 0, None
    while True:
        page = client.get_json(f"/api/v1/namespaces/{namespace}/pods",
                               {"limit": 2000, "continue": cont})
        count += sum(1 for p in page["items"] if not p["spec"].get("nodeName"))
        cont = page["metadata"].get("continue")
        if not cont:
            return count


def log_times(log: Path) -> tuple[float | None, float | None]:
    """From the scheduler's own log: when its caches were synced, and when the last cycle
    that bound something finished (epoch seconds)."""
    synced = last = None
    for line in log.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        when = rec.get("timestamp")
        if not when:
            continue
        ts = datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()
        if rec.get("event") == "caches_synced":
            synced = ts
        elif rec.get("event") in ("cycle_summary", "cycle") and rec.get("binds"):
            last = ts
    return synced, last


def die_with_parent() -> None:
    """In the child: SIGKILL when the benchmark dies, so no scheduler is left behind."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_cpu(marker: str) -> dict[str, float]:
    """CPU seconds so far of each process whose command line names *marker* (the dev
    cluster's directory): apiserver, etcd, the agent and the scheduler."""
    out: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if not entry.name.isdigit() or marker not in cmd:
                continue
            name = next((n for key, n in (("kube-apiserver", "apiserver"), ("/etcd ", "etcd"),
                                          ("devcluster.agent", "agent"), (" run ", "scheduler"))
                         if key in cmd), None)
            if name:
                out[name] = out.get(name, 0.0) + cpu_seconds(int(entry.name))
        except OSError:
            continue
    return out


def print_cpu(label: str, before: dict[str, float], after: dict[str, float], count: int) -> None:
    parts = [f"{k} {(after[k] - before.get(k, 0.0)) / count * 1000:.2f}" for k in sorted(after)]
    print(f"  {label} cpu per pod (ms): {', '.join(parts)}")


def spawn_scheduler(kubeconfig: str, workdir: Path, queue: str, concurrency: int,
                    extra: str = "") -> tuple[subprocess.Popen[bytes], Path, int]:
    """``gang-scheduler run`` as a child process (as deployed: its own interpreter), not
    waited for: (process, its log, its metrics port). *extra*: more config YAML lines."""
    config = workdir / "config.yaml"
    config.write_text(f"defaultQueue: {queue}\nbindConcurrency: {concurrency}\nlogLevel: info\n"
                      + extra)
    port = procs.free_port()
    log = workdir / "scheduler.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli.main", "run", "--kubeconfig", kubeconfig,
         "--config", str(config), "--no-leader-election", "--log-format", "json",
         "--metrics-address", f"127.0.0.1:{port}"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=REPO, preexec_fn=die_with_parent)
    return proc, log, port


def start_scheduler(kubeconfig: str, workdir: Path, queue: str, concurrency: int,
                    extra: str = "") -> tuple[subprocess.Popen[bytes], Path, int]:
    """``spawn_scheduler``, then wait until its /readyz says its caches are synced."""
    proc, log, port = spawn_scheduler(kubeconfig, workdir, queue, concurrency, extra)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"scheduler exited with {proc.returncode}: see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                if r.status == 200:
                    return proc, log, port
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"scheduler not ready after 300s: see {log}")


def summarize_log(log: Path) -> None:
    """Where the scheduler's cycles spent their time, from its own cycle_summary lines."""
    cycles = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") in ("cycle_summary", "cycle") and rec.get("binds"):
            cycles.append(rec)
    if not cycles:
        print("scheduler log: no cycle with binds found")
        return
    decide = sum(c.get("decide_ms", 0) for c in cycles) / 1000
    apply = sum(c.get("apply_ms", 0) for c in cycles) / 1000
    print(f"scheduler: {len(cycles)} cycles decided binds of {sum(c['binds'] for c in cycles)} "
          f"gangs; decide {decide:.3f}s, apply {apply:.2f}s (binds run outside the cycle: "
          f"apply hands them over); largest cycle "
          f"{max(c['binds'] for c in cycles)} gangs")
