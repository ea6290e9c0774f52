"""Start-up to the first bind without a cluster: the live scheduler over a canned apiserver.

Why: on the shared 2-core machine a dev-cluster start-up varies by seconds from one run to
the next, while what a change to the scheduler's own start-up work saves is CPU and counts.
Here ``LiveScheduler`` (the real informers, cache, loop, actuator and binder) lists
``--nodes`` nodes and ``--bound`` bound one-CPU pods plus ``--pods`` pending ones from an
in-process fake that answers every list at once, every write with success, and records
each request. The lists' replies are encoded before the clock starts, so the CPU counted
is the scheduler's own work (decoding, converting, indexing, the first cycle), not the
encoding an apiserver does. Printed per shape (``lone``: one-pod gangs; ``groups``: PodGroups of
``--gang-size``): the process CPU seconds spent from the scheduler's construction to the
sync of its caches and to the first binding POST, the cycles begun and the requests sent
before that first bind, by kind, and the binds and cycles the run took to bind them all.

    .venv/bin/python benchmarks/bench_first_bind.py --nodes 500 --bound 5000 --pods 2000
    .venv/bin/python benchmarks/bench_first_bind.py --profile /tmp/fb   # cProfile per shape

``--profile DIR`` writes each shape's cProfile, every thread merged (cProfile alone sees only
the thread that enabled it), to ``DIR/<shape>.prof`` and prints the top of it.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import pstats
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.kube.client import Response
from scheduler.kube.runner import LiveScheduler
from scheduler.run.config import LeaderElectionConfig, SchedulerConfig

GPU = "nvidia.com/gpu"
NAMESPACE = "bench"
QUEUE = "bench"


def node(i: int) -> dict[str, Any]:
    name = f"kwok-{i:05d}"
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti", GPU: "8"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"node-{i}", "resourceVersion": "1",
                         "labels": {"kubernetes.io/hostname": name,
                                    "gangscheduler.io/pool": "bench"}},
            "status": {"allocatable": alloc, "capacity": alloc,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(namespace: str, name: str, *, node_name: str = "", scheduler: str = "gang-scheduler",
        group: str = "") -> dict[str, Any]:
    """A pod as the apiserver returns it after admission (service account volume, default
    tolerations), as ``bench_scheduler_setup.create_pods`` makes them."""
    labels = {"gangscheduler.io/queue": QUEUE} if scheduler == "gang-scheduler" else {}
    if group:
        labels["scheduling.x-k8s.io/pod-group"] = group
    volume = f"kube-api-access-{name[-5:]}"
    spec: dict[str, Any] = {
        "volumes": [{"name": volume, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt",
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
        "containers": [{"name": "main", "image": "registry.invalid/x",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        "volumeMounts": [{"name": volume, "readOnly": True, "mountPath":
                                          "/var/run/secrets/kubernetes.io/serviceaccount"}],
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}],
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
        "serviceAccount": "default", "securityContext": {}, "schedulerName": scheduler,
        "tolerations": [{"key": f"node.kubernetes.io/{t}", "operator": "Exists",
                         "effect": "NoExecute", "tolerationSeconds": 300}
                        for t in ("not-ready", "unreachable")],
        "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}",
                         "resourceVersion": "1", "labels": labels,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending",
                       "qosClass": "Burstable"}}


def queue() -> dict[str, Any]:
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": QUEUE, "uid": "q", "generation": 1, "resourceVersion": "1"},
            "spec": {"namespaces": [NAMESPACE],
                     "quotas": [{"pool": "bench", "nominal": {GPU: 1_000_000}}]}}


def podgroup(name: str, size: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"pg-{name}",
                         "resourceVersion": "1"},
            "spec": {"minMember": size}}


class Hang:
    """A watch that sends nothing until the informer stops it."""

    status, data = 200, b""

    def __init__(self) -> None:
        self._down = threading.Event()

    def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
        self._down.wait(600)
        return iter(())

    def shutdown(self) -> None:
        self._down.set()

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        self._down.set()


EMPTY_LIST = b'{"items": [], "metadata": {"resourceVersion": "1"}}'


class CannedApi:
    """Lists from *objects* by path, every write a success; records the requests and the
    first binding POST (the process CPU and the cycles begun by then)."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        #: Each list's reply encoded once, before the clock starts: the apiserver's work of
        #: encoding is not the scheduler's CPU.
        self.bodies = {path: json.dumps({"items": items, "metadata": {"resourceVersion": "1"}})
                       .encode() for path, items in objects.items()}
        self.lock = threading.Lock()
        self.requests: collections.Counter[str] = collections.Counter()
        self.before_first: collections.Counter[str] = collections.Counter()
        self.first_bind = threading.Event()
        self.first_cpu = 0.0
        self.binds = 0
        self.live: LiveScheduler | None = None
        self.cycles_at_first = 0
        self.watches: list[Hang] = []

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        if method == "GET":  # a list: every kind is served, most of them empty
            return Response(200, self.bodies.get(path, EMPTY_LIST))
        kind = f"{method} {path.rsplit('/', 1)[-1] if method == 'POST' else path.split('/')[-2]}"
        with self.lock:
            self.requests[kind] += 1
            if path.endswith("/binding"):
                self.binds += 1
                if not self.first_bind.is_set():
                    self.first_cpu = time.process_time()
                    self.cycles_at_first = self.live.scheduler.cycles if self.live else 0
                    self.before_first = collections.Counter(self.requests)
                    self.first_bind.set()
        return Response(201 if method == "POST" else 200, b"{}")

    def stream(self, path: str, query: Any, timeout: Any) -> Hang:
        hang = Hang()
        self.watches.append(hang)
        return hang


def cluster(args: argparse.Namespace, shape: str) -> dict[str, list[dict[str, Any]]]:
    nodes = [node(i) for i in range(args.nodes)]
    bound = [pod("background", f"b-{i:06d}", node_name=nodes[i % len(nodes)]["metadata"]["name"],
                 scheduler="nobody") for i in range(args.bound)]
    size = args.gang_size if shape == "groups" else 0
    pending = [pod(NAMESPACE, f"p-{i:06d}", group=f"g-{i // size:05d}" if size else "")
               for i in range(args.pods)]
    groups = [podgroup(f"g-{i:05d}", size) for i in range(args.pods // size)] if size else []
    return {"/api/v1/nodes": nodes, "/api/v1/pods": bound + pending,
            "/apis/gangscheduler.io/v1alpha1/queues": [queue()],
            "/apis/scheduling.x-k8s.io/v1alpha1/podgroups": groups}


class ThreadProfiles:
    """A cProfile in every thread started while it is on, merged at the end."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []

    def __enter__(self) -> ThreadProfiles:
        def start(*_: Any) -> None:
            sys.setprofile(None)
            prof = cProfile.Profile()
            self.profiles.append(prof)
            prof.enable()
        threading.setprofile(start)
        main = cProfile.Profile()
        self.profiles.append(main)
        main.enable()
        return self

    def __exit__(self, *_: Any) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]
        for p in self.profiles:
            p.disable()

    def stats(self) -> pstats.Stats:
        return pstats.Stats(*self.profiles)


class Marks:
    """Process CPU seconds when the first cycle's phases ended: its input read, the decision
    made, the plan applied (binds handed over), wrapped around the live objects' methods."""

    def __init__(self, live: LiveScheduler, cpu0: float, wall0: float) -> None:
        self.cpu0, self.wall0 = cpu0, wall0
        self.at: dict[str, tuple[float, float]] = {}
        loop = live.scheduler
        self._wrap(loop.cache, "cycle_input", "input")
        self._wrap(loop.actuator, "apply", "applied")
        from scheduler.decide import cycle as decide_module  # the loop calls cycle.decide
        decide = decide_module.decide

        def timed_decide(*a: Any, **kw: Any) -> Any:
            self.mark("decide from")
            out = decide(*a, **kw)
            self.mark("decided")
            return out
        self._decide = decide
        decide_module.decide = timed_decide

    def _wrap(self, obj: Any, name: str, mark: str) -> None:
        method = getattr(obj, name)

        def timed(*a: Any, **kw: Any) -> Any:
            out = method(*a, **kw)
            self.mark(mark)
            return out
        setattr(obj, name, timed)

    def mark(self, name: str) -> None:
        self.at.setdefault(name, (time.process_time() - self.cpu0,
                                  time.monotonic() - self.wall0))

    def close(self) -> None:
        from scheduler.decide import cycle as decide_module
        decide_module.decide = self._decide


def run_shape(args: argparse.Namespace, shape: str) -> dict[str, Any]:
    api = CannedApi(cluster(args, shape))
    config = SchedulerConfig(default_queue=QUEUE, bind_concurrency=32,
                             leader_election=LeaderElectionConfig(enabled=False))
    prof = ThreadProfiles() if args.profile else None
    if prof is not None:
        prof.__enter__()
    cpu0, wall0 = time.process_time(), time.monotonic()
    live = LiveScheduler(config, api, identity="bench")  # type: ignore[arg-type]
    api.live = live
    marks = Marks(live, cpu0, wall0)
    live.start()
    marks.mark("synced")
    synced_cpu = time.process_time() - cpu0
    loop = threading.Thread(target=live.run, name="loop", daemon=True)
    loop.start()
    api.first_bind.wait(300)
    first_cpu, first_wall = api.first_cpu - cpu0, time.monotonic() - wall0
    if prof is not None:
        prof.__exit__()
    deadline = time.monotonic() + 300
    while api.binds < args.pods and time.monotonic() < deadline:
        time.sleep(0.05)
    all_cpu = time.process_time() - cpu0
    live.stop()
    for w in api.watches:
        w.shutdown()
    loop.join(30)
    marks.close()
    if prof is not None:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        stats = prof.stats()
        stats.dump_stats(Path(args.profile) / f"{shape}.prof")
        print(f"== {shape}: cumulative, to the first bind")
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
    return {"shape": shape, "synced_cpu": synced_cpu, "first_cpu": first_cpu,
            "first_wall": first_wall, "cycles_at_first": api.cycles_at_first,
            "before_first": dict(api.before_first), "binds": api.binds,
            "cycles": live.scheduler.cycles, "all_cpu": all_cpu, "marks": marks.at}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500,
                        help="nodes of 64 CPUs and 8 GPUs the lists return (default 500)")
    parser.add_argument("--bound", type=int, default=5000,
                        help="one-CPU pods already bound, of another scheduler (default 5000)")
    parser.add_argument("--pods", type=int, default=2000,
                        help="pending one-CPU pods for gang-scheduler (default 2000)")
    parser.add_argument("--gang-size", type=int, default=8,
                        help="members per PodGroup in the groups shape (default 8)")
    parser.add_argument("--shapes", default="lone,groups",
                        help="comma-separated: lone (one-pod gangs), groups (PodGroups)")
    parser.add_argument("--profile", help="a directory for each shape's cProfile")
    parser.add_argument("--top", type=int, default=40,
                        help="functions of each profile printed (default 40)")
    args = parser.parse_args(argv)
    from scheduler.run.logconfig import configure_logging
    configure_logging("warning")
    for shape in args.shapes.split(","):
        r = run_shape(args, shape)
        print(f"{shape:<7} CPU to synced {r['synced_cpu']:.2f}s, to 1st bind {r['first_cpu']:.2f}s "
              f"(wall {r['first_wall']:.2f}s), cycles begun by then {r['cycles_at_first']}; "
              f"requests before it {r['before_first']}; all {r['binds']} binds in "
              f"{r['cycles']} cycles, CPU {r['all_cpu']:.2f}s", flush=True)
        print("        first cycle CPU marks: " + ", ".join(
            f"{k} {c:.2f}s (wall {w:.2f}s)" for k, (c, w) in r["marks"].items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
