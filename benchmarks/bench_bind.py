"""The raw bind rate of an apiserver, and what gang-atomic binding costs on top of it.

N pending pods on M fake nodes are created, then bound with no scheduling decisions at all:

- ``raw``:  one ``pods/binding`` POST per pod from a pool of ``--concurrency`` threads, the
  ceiling any scheduler on this apiserver (and this Python client) can reach;
- ``gang``: ``Binder.bind_gangs`` with gangs of ``--gang-size`` (uid preconditions, per-gang
  outcome and rollback bookkeeping), all gangs submitted at once on the same pool size.

Uses the dev cluster: ``--kubeconfig`` of a running one (``gang-scheduler dev-cluster up``), or
by default a throwaway one started (and stopped) by this script. Prints pods/s; no assertions.

    .venv/bin/python benchmarks/bench_bind.py --pods 4000 --nodes 500 --concurrency 32
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from scheduler.kube.client import KubeClient, connect
from scheduler.kube.write.binder import Binder
from scheduler.model import PodRef
from scheduler.run.logconfig import configure_logging

BENCH_LABEL = "gangscheduler.io/bench"


@contextmanager
def dev_cluster(kubeconfig: str | None) -> Iterator[str]:
    """A kubeconfig path: the given one, or a throwaway dev cluster's."""
    if kubeconfig:
        yield kubeconfig
        return
    from scheduler.tools.devcluster.cluster import DevCluster

    with tempfile.TemporaryDirectory(prefix="bench-bind-") as tmp:
        cluster = DevCluster(Path(tmp), owned=True)
        cluster.up(log=lambda line: print(f"[dev-cluster] {line}", file=sys.stderr))
        try:
            yield str(cluster.kubeconfig)
        finally:
            cluster.down(log=lambda line: None)


def timed(label: str, count: int, work: Callable[[], object]) -> float:
    """Run *work*, print and return the rate in items per second (and our CPU per item)."""
    start, cpu = time.perf_counter(), time.process_time()
    work()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    rate = count / elapsed if elapsed > 0 else float("inf")
    print(f"{label:<22} {count:>7} in {elapsed:7.2f}s  {rate:8.1f}/s  "
          f"client cpu {cpu / count * 1000:5.2f} ms each")
    return rate


def create_nodes(client: KubeClient, count: int, prefix: str, pool: ThreadPoolExecutor,
                 gpus: int = 8) -> list[str]:
    """Fake GPU nodes (objects only; the bench needs targets, not kubelets)."""
    names = [f"{prefix}-{i:05d}" for i in range(count)]

    def create(name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {BENCH_LABEL: "true",
                                                      "kubernetes.io/hostname": name}}}
        reply = client.request("POST", "/api/v1/nodes", body=body)
        if not reply.ok and reply.status != 409:
            raise RuntimeError(f"node {name}: HTTP {reply.status}: {reply.message()}")

    list(pool.map(create, names))
    return names


def create_pods(client: KubeClient, namespace: str, count: int, pool: ThreadPoolExecutor,
                prefix: str = "p", scheduler_name: str = "gang-scheduler") -> list[PodRef]:
    """Pending one-GPU pods that no scheduler owns yet; returns refs with uids."""

    def create(i: int) -> PodRef:
        name = f"{prefix}-{i:06d}"
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {BENCH_LABEL: "true"}},
                "spec": {"schedulerName": scheduler_name, "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "registry.invalid/x",
                                         "resources": {"requests": {"cpu": "1"},
                                                       "limits": {"nvidia.com/gpu": "1"}}}]}}
        reply = client.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)
        if not reply.ok:
            raise RuntimeError(f"pod {name}: HTTP {reply.status}: {reply.message()}")
        return PodRef(namespace, name, reply.json()["metadata"]["uid"])

    return list(pool.map(create, range(count)))


def raw_bind(client: KubeClient, plan: Sequence[tuple[PodRef, str]],
             pool: ThreadPoolExecutor) -> int:
    """One binding POST per pod, nothing else; returns how many failed."""

    def bind(item: tuple[PodRef, str]) -> bool:
        ref, node = item
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": ref.name, "namespace": ref.namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        path = f"/api/v1/namespaces/{ref.namespace}/pods/{ref.name}/binding"
        return client.request("POST", path, body=body).ok

    return sum(not ok for ok in pool.map(bind, plan))


def gang_bind(binder: Binder, plan: Sequence[tuple[PodRef, str]], gang_size: int) -> int:
    """All gangs through ``Binder.bind_gangs``; returns how many gangs failed."""
    gangs = [(f"bench/g{i // gang_size}", plan[i:i + gang_size])
             for i in range(0, len(plan), gang_size)]
    return sum(not o.ok for o in binder.bind_gangs(gangs, "gang-scheduler"))


def spread(pods: Sequence[PodRef], nodes: Sequence[str],
           gang_size: int) -> list[tuple[PodRef, str]]:
    """Gang members on consecutive nodes, gangs round-robin over the nodes."""
    return [(ref, nodes[(i // gang_size + i % gang_size) % len(nodes)])
            for i, ref in enumerate(pods)]


def bench_mode(mode: str, client: KubeClient, binder: Binder, pool: ThreadPoolExecutor,
               namespace: str, nodes: Sequence[str], args: argparse.Namespace) -> float:
    """Create ``args.pods`` fresh pods, bind them in *mode*; returns pods bound per second."""
    pods: list[PodRef] = []
    timed(f"create pods ({mode})", args.pods,
          lambda: pods.extend(create_pods(client, namespace, args.pods, pool, prefix=mode)))
    plan = spread(pods, nodes, args.gang_size)
    failed: list[int] = []
    if mode == "raw":
        rate = timed("bind (raw)", args.pods, lambda: failed.append(raw_bind(client, plan, pool)))
    else:
        rate = timed("bind (gang)", args.pods,
                     lambda: failed.append(gang_bind(binder, plan, args.gang_size)))
    if failed[0]:
        print(f"  {failed[0]} {'pods' if mode == 'raw' else 'gangs'} failed")
    return rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="a running dev cluster (default: start one)")
    parser.add_argument("--pods", type=int, default=2000, help="pods per mode")
    parser.add_argument("--nodes", type=int, default=250)
    parser.add_argument("--gang-size", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--mode", choices=("raw", "gang", "both", "gang-first"), default="both",
                        help="both: raw then gang; gang-first: the other order")
    args = parser.parse_args(argv)
    configure_logging("warning")

    with dev_cluster(args.kubeconfig) as kubeconfig:
        client = connect(kubeconfig, pool_maxsize=max(64, args.concurrency * 2))
        run = uuid.uuid4().hex[:6]
        namespace = f"bench-{run}"
        pool = ThreadPoolExecutor(max_workers=args.concurrency)
        binder = Binder(client, concurrency=args.concurrency)
        try:
            assert client.request("POST", "/api/v1/namespaces",
                                  body={"metadata": {"name": namespace}}).ok
            print(f"apiserver {client.get_json('/version')['gitVersion']}, namespace {namespace}, "
                  f"concurrency {args.concurrency}, gang size {args.gang_size}")
            nodes: list[str] = []
            timed("create nodes", args.nodes,
                  lambda: nodes.extend(create_nodes(client, args.nodes, f"bench-{run}", pool)))
            rates: dict[str, float] = {}
            order = {"both": ("raw", "gang"), "gang-first": ("gang", "raw")}
            for mode in order.get(args.mode, (args.mode,)):
                rates[mode] = bench_mode(mode, client, binder, pool, namespace, nodes, args)
            if len(rates) == 2:
                print(f"gang / raw bind rate: {rates['gang'] / rates['raw']:.2f}")
        finally:
            binder.close()
            pool.shutdown()
            client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
