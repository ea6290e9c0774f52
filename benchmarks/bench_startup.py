"""Start-up on a busy cluster: process start -> first bind, checkouts alternating on the same
cluster content.

Why its own script: start-up grows with the pods already in the cluster (the scheduler lists
and converts every one of them before its first cycle), so a fair comparison gives every
contender the same number of bound pods. Here ``--bound`` one-CPU pods are created and bound
once (raw binding POSTs, no scheduler) and stay; each round then gives each contender a fresh
namespace of ``--pending`` pods, starts its process and stamps the first bind with a watch.
The pending pods a round binds stay too (a few hundred against tens of thousands).

Contenders: each ``--checkout`` (a source tree whose ``gang-scheduler run`` is started with
this interpreter and that tree first on ``PYTHONPATH``), and ``kube`` (unthrottled
kube-scheduler, the dev cluster's binary) with ``--kube``. Prints every round and the median
per contender. No assertions.

    .venv/bin/python benchmarks/bench_startup.py --state-dir /tmp/dc --nodes 1000 \\
        --bound 20000 --checkout /work/main --checkout . --rounds 2 --kube
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_bind import raw_bind
from bench_kwok import (
    BindWatch,
    bench_nodes,
    create_namespace,
    kwok_session,
    list_pages,
    load,
    say,
    start_kube_scheduler,
    usage,
)
from bench_scheduler_setup import create_pods, create_queue, die_with_parent
from bench_versus import rotated

from scheduler.kube.client import KubeClient
from scheduler.model import PodRef
from scheduler.run.logconfig import configure_logging
from scheduler.tools.devcluster import procs
from scheduler.tools.devcluster.cluster import DevCluster

BOUND_NAMESPACE = "startup-bound"


def ensure_bound(client: KubeClient, count: int, pool: ThreadPoolExecutor) -> None:
    """At least *count* pods bound to the bench nodes in ``startup-bound`` (kept across runs)."""
    create_namespace(client, BOUND_NAMESPACE)
    pods = list(list_pages(client, f"/api/v1/namespaces/{BOUND_NAMESPACE}/pods"))
    have = sum(1 for p in pods if p["spec"].get("nodeName"))
    unbound = [PodRef(BOUND_NAMESPACE, p["metadata"]["name"], p["metadata"]["uid"])
               for p in pods if not p["spec"].get("nodeName")]
    missing = count - have - len(unbound)
    if missing > 0:
        t0 = time.monotonic()
        unbound += create_pods(client, BOUND_NAMESPACE, missing, pool, prefix="b",
                               scheduler_name="nobody", gpus=0, first=len(pods))
        say(f"{missing} pods created in {time.monotonic() - t0:.1f}s; {load()}")
    if not unbound:
        return
    nodes = sorted(n["metadata"]["name"] for n in list_pages(client, "/api/v1/nodes")
                   if n["metadata"]["name"].startswith("kwok-"))
    plan = [(ref, nodes[i % len(nodes)]) for i, ref in enumerate(unbound)]
    t0 = time.monotonic()
    failed = raw_bind(client, plan, pool)
    say(f"{len(plan) - failed} pods bound in {time.monotonic() - t0:.1f}s; {load()}")


def wait_running(client: KubeClient, namespace: str, timeout_s: float = 900.0) -> int:
    """Wait until no pod of *namespace* is Pending (kwok marks a bound pod Running); the
    number still Pending at the end (0 unless *timeout_s* ran out). Asks once a second for
    one Pending pod, so the wait itself costs the apiserver little."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    pending = {"fieldSelector": "status.phase=Pending"}
    deadline = time.monotonic() + timeout_s
    while client.get_json(path, {**pending, "limit": 1}).get("items"):
        if time.monotonic() > deadline:
            return len(client.get_json(path, pending).get("items") or ())
        time.sleep(1.0)
    return 0


def settle_bound(client: KubeClient) -> None:
    """Wait for kwok to mark the background pods Running, and say how long it took: it does
    so well after their binds, and until it has, its status writes would slow whatever is
    measured first."""
    t0 = time.monotonic()
    left = wait_running(client, BOUND_NAMESPACE)
    say(f"background pods Running after {time.monotonic() - t0:.1f}s"
        + (f" ({left} still Pending)" if left else "") + f"; {load()}")


def spawn_checkout(checkout: Path, kubeconfig: str, workdir: Path,
                   queue: str) -> subprocess.Popen[bytes]:
    """``gang-scheduler run`` of *checkout*, as ``bench_scheduler_setup.spawn_scheduler``
    starts it, with *checkout* first on the import path."""
    config = workdir / "config.yaml"
    config.write_text(f"defaultQueue: {queue}\nbindConcurrency: 32\nlogLevel: info\n")
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    prefix = [sys.executable]
    if profile := os.environ.get("BENCH_STARTUP_PROFILE"):  # a directory: sample the stacks
        env["SAMPLE_OUT"] = str(Path(profile) / f"{checkout.name}-{queue}.txt")
        prefix.append(str(Path(__file__).with_name("sample_stacks.py")))
    return subprocess.Popen(
        [*prefix, "-m", "scheduler.cli.main", "run", "--kubeconfig", kubeconfig,
         "--config", str(config), "--no-leader-election", "--log-format", "json",
         "--metrics-address", f"127.0.0.1:{procs.free_port()}"],
        stdout=(workdir / "scheduler.log").open("wb"), stderr=subprocess.STDOUT, cwd=checkout,
        env=env, preexec_fn=die_with_parent)


def one_start(cluster: DevCluster, client: KubeClient, contender: str,
              args: argparse.Namespace, pool: ThreadPoolExecutor, workdir: Path) -> float | None:
    """Seconds from process start to the first bind of a fresh namespace's pending pods."""
    namespace = f"su-{uuid.uuid4().hex[:6]}"
    create_namespace(client, namespace)
    kube = contender == "kube"
    scheduler_name = "bench-startup-kube" if kube else "gang-scheduler"
    if not kube:
        create_queue(client, namespace, namespace, args.pending)
    create_pods(client, namespace, args.pending, pool, prefix="p", scheduler_name=scheduler_name,
                gpus=0, queue="" if kube else namespace)
    with BindWatch(client, namespace) as watch:
        launched = time.time()
        if kube:
            proc = start_kube_scheduler(cluster, "bench-startup-kube", scheduler_name, 5000.0,
                                        5000)
            pid, alive = proc.pid, lambda: procs.is_alive(proc)
        else:
            run_dir = workdir / namespace
            run_dir.mkdir(parents=True)
            popen = spawn_checkout(Path(contender), str(cluster.kubeconfig), run_dir, namespace)
            pid, alive = popen.pid, lambda: popen.poll() is None
        try:
            watch.wait(1, args.stall, alive)
            used = usage(pid)
            say(f"  {contender}: cpu {used.cpu_s:.1f}s, peak RSS {used.peak_rss_mib:.0f} MiB "
                "at first bind")
        finally:
            if kube:
                procs.stop(proc)
            else:
                popen.terminate()
                popen.wait(timeout=120)
    return watch.span()[0] - launched if watch.bound else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", help="a running dev cluster (default: start one)")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--existing-nodes", action="store_true",
                        help="create no nodes: --nodes of the bench pool are already there")
    parser.add_argument("--bound", type=int, default=20000, help="pods bound before any start")
    parser.add_argument("--pending", type=int, default=200, help="pending pods per start")
    parser.add_argument("--checkout", action="append", default=[],
                        help="a source tree to start (repeat: this order in the first round, "
                             "rotated by one in each next one)")
    parser.add_argument("--kube", action="store_true", help="also start kube-scheduler")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--stall", type=float, default=300.0)
    args = parser.parse_args(argv)
    contenders = [str(Path(c).resolve()) for c in args.checkout] + (["kube"] if args.kube else [])
    if not contenders:
        parser.error("name at least one --checkout or --kube")
    configure_logging("warning")
    workdir = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    with kwok_session(args.state_dir, 32, 64) as (cluster, client, pool):
        bench_nodes(client, args, pool, uuid.uuid4().hex[:5])
        ensure_bound(client, args.bound, pool)
        settle_bound(client)
        times: dict[str, list[float]] = {c: [] for c in contenders}
        for round_no in range(1, args.rounds + 1):
            # Each start binds its pending pods, so a contender always going first would
            # always see the fewest: the order rotates by one per round.
            for contender in rotated(contenders, round_no - 1):
                took = one_start(cluster, client, contender, args, pool, workdir)
                say(f"round {round_no} {contender}: start-up "
                    f"{'stalled' if took is None else f'{took:.2f}s'}; {load()}")
                if took is not None:
                    times[contender].append(took)
        print(f"{args.nodes} nodes, {args.bound} bound pods, {args.pending} pending per start")
        for contender, got in times.items():
            rounds = ", ".join(f"{t:.2f}" for t in got)
            median = f"{statistics.median(got):.2f}" if got else "-"
            print(f"{contender:<40} median {median} s  (rounds: {rounds})")
        print(f"({load()}; logs in {workdir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
