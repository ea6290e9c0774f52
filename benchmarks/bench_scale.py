"""gang-scheduler at scale on kwok nodes: a backlog of gangs on thousands of nodes, then one
large gang on top.

What runs, in order, on a dev cluster whose nodes stay Ready without being written to
(node liveness ``scale``: ``scheduler/tools/devcluster/liveness.py``):

1. ``--nodes`` kwok nodes of ``--gpus`` GPUs (each one POST carrying its Ready status);
2. ``--pods`` pending one-GPU pods in PodGroups of ``--gang-size``, created with progress
   output (the backlog exists before the scheduler, as in ``bench_versus``);
3. ``gang-scheduler run`` started as its own process; a watch of ours stamps every bind;
4. once the backlog is bound, one PodGroup of ``--big-gang`` one-GPU pods, timed from its
   last member created to its last member bound (KAI-Scheduler's 512-pod scenario, on a
   cluster already running the backlog).

Printed, each with the machine's load beside it: pods/s from the process start and from its
first bind, the cycle time (``decide``) p50/p99 from the scheduler's log (cycles that bound
something) and from its ``gang_scheduler_cycle_duration_seconds`` histogram (every cycle), the
scheduler's CPU and peak RSS, the apiserver's and etcd's RSS (now and peak), and the large
gang's time. No assertions.

The pods and the large gang must fit: ``--pods + --big-gang <= --nodes x --gpus`` (5,000 nodes
x 8 GPUs fit 40,000 one-GPU pods, so the issue's 50,000 do not fit as one-GPU pods).

    .venv/bin/python benchmarks/bench_scale.py --nodes 5000 --pods 20000
    .venv/bin/python benchmarks/bench_scale.py --nodes 200 --pods 800 --big-gang 64  # a smoke run
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_kwok import (
    BindWatch,
    bench_nodes,
    cluster_cpu,
    cluster_pids,
    create_job,
    create_namespace,
    kwok_cluster,
    load,
    say,
    usage,
)
from bench_scheduler_setup import create_groups, create_pods, create_queue, spawn_scheduler
from bench_stream import bucket_quantile, histogram

from scheduler.kube.client import KubeClient, connect
from scheduler.run.logconfig import configure_logging
from scheduler.tools.devcluster import liveness

CYCLE_HISTOGRAM = "gang_scheduler_cycle_duration_seconds"
PROGRESS_EVERY_S = 15.0
FEW_CYCLES = 10  # up to this many cycles with binds are listed, not summarised


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", help="a running dev cluster (default: start one with "
                        "node liveness 'scale')")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--pods", type=int, default=20000, help="one-GPU pods of the backlog")
    parser.add_argument("--gang-size", type=int, default=8)
    parser.add_argument("--big-gang", type=int, default=512,
                        help="pods of the gang created on top (0: none)")
    parser.add_argument("--concurrency", type=int, default=32,
                        help="the scheduler's bindConcurrency; the pod-creating threads")
    parser.add_argument("--stall", type=float, default=300.0,
                        help="stop waiting when no pod was bound for this many seconds")
    parser.add_argument("--existing-nodes", action="store_true",
                        help="create no nodes: --nodes of the bench pool are already there")
    parser.add_argument("--workdir", help="where the scheduler's config and log go")
    args = parser.parse_args(argv)
    problem = argument_problem(args)
    if problem:
        parser.error(problem)
    configure_logging("warning")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with kwok_cluster(args.state_dir, liveness.SCALE) as cluster:
        client = connect(str(cluster.kubeconfig), pool_maxsize=max(64, args.concurrency * 2))
        pool = ThreadPoolExecutor(max_workers=args.concurrency)
        run = uuid.uuid4().hex[:5]
        namespace = f"scale-{run}"
        try:
            took = bench_nodes(client, args, pool, run, timeout_s=max(1800.0, args.nodes * 0.5))
            if took is not None:
                print(f"{args.nodes} kwok nodes x {args.gpus} GPUs Ready in {took:.1f}s; "
                      f"{load()}", flush=True)
            create_namespace(client, namespace)
            create_queue(client, namespace, namespace, args.nodes * args.gpus)
            create_backlog(client, namespace, pool, args)
            pids = cluster_pids(cluster)
            with BindWatch(client, namespace) as watch:
                launched = time.time()
                proc, log, port = spawn_scheduler(str(cluster.kubeconfig), workdir, namespace,
                                                  args.concurrency)
                say(f"scheduler started (pid {proc.pid}, log {log}); {load()}")

                def alive() -> bool:
                    return proc.poll() is None

                before = cluster_cpu(cluster)
                with Progress(watch, args.pods, proc.pid):
                    complete = watch.wait(args.pods, args.stall, alive)
                spent = {k: v - before.get(k, 0.0) for k, v in cluster_cpu(cluster).items()}
                report_backlog(watch, launched, complete, args)
                print("CPU while the backlog bound: " + ", ".join(
                    f"{k} {v:.1f}s" for k, v in sorted(spent.items()) if v >= 0.05)
                    + f"; {load()}")
                if args.big_gang and complete:
                    big_gang(client, namespace, pool, watch, args, alive)
                if alive():
                    report_cycles(log, port)
                    report_memory(proc.pid, pids)
                else:
                    print(f"the scheduler exited (code {proc.returncode}): see {log}")
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)
            print(f"({load()}; scheduler log {log})")
        finally:
            pool.shutdown()
            client.close()
    return 0


def argument_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options, naming them, or None."""
    for name in ("nodes", "gpus", "pods", "gang_size", "concurrency"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, not {getattr(args, name)}"
    if args.big_gang < 0:
        return f"--big-gang must be 0 or more, not {args.big_gang}"
    if args.pods % args.gang_size:
        return f"--pods {args.pods} is not a multiple of --gang-size {args.gang_size}"
    capacity = args.nodes * args.gpus
    if args.pods + args.big_gang > capacity:
        return (f"--pods {args.pods} + --big-gang {args.big_gang} one-GPU pods do not fit on "
                f"--nodes {args.nodes} x --gpus {args.gpus} = {capacity} GPUs")
    return None


def create_backlog(client: KubeClient, namespace: str, pool: ThreadPoolExecutor,
                   args: argparse.Namespace) -> None:
    """The pending pods and their PodGroups, a slice at a time so progress shows."""
    gangs = args.pods // args.gang_size
    slice_gangs = max(1, min(gangs, 2000 // args.gang_size))
    t0 = time.monotonic()
    created = 0
    for first in range(0, gangs, slice_gangs):
        count = min(slice_gangs, gangs - first)
        create_pods_slice(client, namespace, pool, first, count, args.gang_size)
        created += count * args.gang_size
        rate = created / (time.monotonic() - t0)
        say(f"{created} of {args.pods} pods created ({rate:.0f}/s); {load()}")
    create_groups(client, namespace, gangs, args.gang_size, pool)
    print(f"{args.pods} pending one-GPU pods in {gangs} PodGroups of {args.gang_size} created "
          f"in {time.monotonic() - t0:.1f}s; {load()}", flush=True)


def create_pods_slice(client: KubeClient, namespace: str, pool: ThreadPoolExecutor,
                      first_gang: int, gangs: int, size: int) -> None:
    """Pods of gangs ``first_gang .. first_gang + gangs - 1``, named and grouped as
    ``create_pods`` names them (``p-<i>`` in PodGroup ``g-<i // size>``)."""
    create_pods(client, namespace, gangs * size, pool, prefix="p",
                scheduler_name="gang-scheduler", gpus=1, gang_size=size, queue=namespace,
                first=first_gang * size)


class Progress:
    """Every ``PROGRESS_EVERY_S`` while the backlog binds: pods bound, the rate since the last
    line, the scheduler's RSS, the load."""

    def __init__(self, watch: BindWatch, total: int, pid: int) -> None:
        self._watch, self._total, self._pid = watch, total, pid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        seen, since = 0, time.monotonic()
        while not self._stop.wait(PROGRESS_EVERY_S):
            bound, now = len(self._watch.bound), time.monotonic()
            say(f"{bound} of {self._total} bound ({(bound - seen) / (now - since):.0f}/s "
                f"lately); scheduler RSS {usage(self._pid).rss_mib:.0f} MiB; {load()}")
            seen, since = bound, now


def report_backlog(watch: BindWatch, launched: float, complete: bool,
                   args: argparse.Namespace) -> None:
    bound = len(watch.bound)
    if not bound:
        print(f"backlog: nothing bound within --stall {args.stall:g}s; {load()}")
        return
    first, last = watch.span()
    from_first = (bound - 1) / (last - first) if last > first else float("nan")
    print(f"backlog: {bound} of {args.pods} bound{'' if complete else ' (stalled)'}; "
          f"start-up to first bind {first - launched:.1f}s; {bound / (last - launched):.1f} "
          f"pods/s from process start, {from_first:.1f} from first bind; {load()}", flush=True)


def big_gang(client: KubeClient, namespace: str, pool: ThreadPoolExecutor, watch: BindWatch,
             args: argparse.Namespace, alive: Callable[[], bool]) -> None:
    """One PodGroup of ``--big-gang`` one-GPU pods on top of the bound backlog."""
    names = [f"big-{i:04d}" for i in range(args.big_gang)]
    created = create_job(client, namespace, namespace, names, 1, pool, group="big")
    watch.wait(names, args.stall, alive)
    if all(n in watch.bound for n in names):
        print(f"one {args.big_gang}-pod gang on top: last member created -> last bound "
              f"{max(watch.bound[n] for n in names) - created:.2f}s (KAI-Scheduler, 500 "
              f"nodes: 48.7 s); {load()}", flush=True)
    else:
        print(f"one {args.big_gang}-pod gang on top: "
              f"{sum(n in watch.bound for n in names)} of {args.big_gang} bound within "
              f"--stall {args.stall:g}s; {load()}", flush=True)


def report_cycles(log: Path, port: int) -> None:
    """Cycle time (decide) from the log's cycle summaries and from the histogram."""
    decide, apply = [], []
    for line in log.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == "cycle_summary" and rec.get("binds"):
            decide.append(float(rec.get("decide_ms", 0.0)))
            apply.append(float(rec.get("apply_ms", 0.0)))
    if len(decide) > FEW_CYCLES:
        print(f"cycles that bound something ({len(decide)}, from the log): decide p50 "
              f"{percentile(decide, 0.5):.0f} ms, p99 {percentile(decide, 0.99):.0f} ms, max "
              f"{max(decide):.0f} ms; apply p50 {percentile(apply, 0.5):.0f} ms, p99 "
              f"{percentile(apply, 0.99):.0f} ms; {load()}")
    elif decide:  # a backlog decided in a cycle or two: quantiles of so few would mislead
        print(f"cycles that bound something ({len(decide)}, from the log, in order): decide "
              + ", ".join(f"{d:.0f}" for d in decide) + " ms; apply "
              + ", ".join(f"{a:.0f}" for a in apply) + f" ms; {load()}")
    buckets = histogram(port, CYCLE_HISTOGRAM)
    total = buckets[-1][1] if buckets else 0
    print(f"every cycle ({total:.0f}, {CYCLE_HISTOGRAM}): p50 "
          f"{bucket_quantile(buckets, 0.5) * 1000:.0f} ms, p99 "
          f"{bucket_quantile(buckets, 0.99) * 1000:.0f} ms (bucket-interpolated); {load()}")


def report_memory(pid: int, cluster: dict[str, int]) -> None:
    used = usage(pid)
    print(f"scheduler: CPU {used.cpu_s:.1f}s, peak RSS {used.peak_rss_mib:.0f} MiB "
          f"(now {used.rss_mib:.0f}); {load()}")
    for name in ("kube-apiserver", "etcd", "kwok", "kube-controller-manager"):
        if name in cluster:
            u = usage(cluster[name])
            print(f"{name}: RSS {u.rss_mib:.0f} MiB now, peak {u.peak_rss_mib:.0f} MiB; "
                  f"CPU {u.cpu_s:.1f}s since it started; {load()}")


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank q-quantile of *values* (not empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


if __name__ == "__main__":
    sys.exit(main())
