"""Gang latency under a stream: gangs arrive at a steady rate on kwok nodes, and each one's
time from "last member created" to "last member bound" is measured by a watch of ours and by
the scheduler's own ``gang_scheduler_gang_scheduling_latency_seconds`` histogram.

Not a backlog (``bench_versus`` is that): ``gang-scheduler run`` is up and idle first, then
every ``1 / --rate`` seconds one PodGroup of ``--gang-size`` one-GPU pods is created (the
pods concurrently, as a Job controller would). kwok runs each pod for ``--runtime`` seconds
(``gangscheduler.io/simulated-runtime``), so the cluster settles at about
``rate x runtime x gang-size`` GPUs in use; the script prints that fill and refuses a stream
that would take the cluster past ``--max-fill`` (the target, p99 < 0.5 s, is stated for a
cluster below 80 % full).

    .venv/bin/python benchmarks/bench_stream.py                       # 1,000 nodes, 4 gangs/s
    .venv/bin/python benchmarks/bench_stream.py --nodes 200 --rate 2 --duration 60
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_kwok import (
    BindWatch,
    bench_nodes,
    create_job,
    create_namespace,
    kwok_cluster,
    load,
    say,
    stream_arguments,
    usage,
)
from bench_scheduler_setup import create_queue, start_scheduler

from scheduler.kube.client import KubeClient, connect
from scheduler.run.logconfig import configure_logging

HISTOGRAM = "gang_scheduler_gang_scheduling_latency_seconds"
RUNTIME_ANNOTATION = "gangscheduler.io/simulated-runtime"


def histogram(port: int, name: str) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) of an unlabelled histogram on the scheduler's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    out = []
    for line in text.splitlines():
        if line.startswith(f"{name}_bucket{{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            out.append((float(bound), float(line.rsplit(" ", 1)[1])))
    return sorted(out)


def bucket_quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The q-quantile by linear interpolation inside the bucket (Prometheus'
    ``histogram_quantile``)."""
    total = buckets[-1][1] if buckets else 0.0
    if not total:
        return float("nan")
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-9)
        lower, below = bound, count
    return lower


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    stream_arguments(parser, rate=4.0, runtime=120.0, duration=180.0)
    parser.add_argument("--max-fill", type=float, default=0.8,
                        help="refuse a stream whose steady state fills more of the GPUs")
    parser.add_argument("--existing-nodes", action="store_true",
                        help="create no nodes: --nodes of the bench pool are already there "
                        "(a --state-dir cluster a previous run filled)")
    parser.add_argument("--workdir", help="where the scheduler's config and log go")
    args = parser.parse_args(argv)
    capacity = args.nodes * args.gpus
    fill = args.rate * min(args.runtime, args.duration) * args.gang_size / capacity
    if fill > args.max_fill:
        parser.error(f"{args.rate} gangs/s x {args.runtime:g}s x {args.gang_size} GPUs fills "
                     f"{fill:.0%} of {capacity} GPUs: above --max-fill {args.max_fill:.0%}")
    configure_logging("warning")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-stream-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with kwok_cluster(args.state_dir) as cluster:
        client = connect(str(cluster.kubeconfig), pool_maxsize=64)
        pool = ThreadPoolExecutor(max_workers=max(8, args.gang_size * 2))
        run = uuid.uuid4().hex[:5]
        namespace = f"stream-{run}"
        try:
            bench_nodes(client, args, pool, run)
            create_namespace(client, namespace)
            create_queue(client, namespace, namespace, capacity)
            proc, log, port = start_scheduler(str(cluster.kubeconfig), workdir, namespace, 32)
            say(f"scheduler ready (pid {proc.pid}, log {log}); {load()}")
            created: dict[str, float] = {}
            with BindWatch(client, namespace) as watch:
                stream(client, namespace, args, pool, created)
                say(f"{len(created)} gangs created; waiting for their binds; {load()}")
                watch.wait(len(created) * args.gang_size, 60.0, lambda: proc.poll() is None)
                used = usage(proc.pid)
                buckets = histogram(port, HISTOGRAM)
            proc.terminate()
            proc.wait(timeout=60)
            report(created, watch, buckets, args, fill, used.peak_rss_mib)
        finally:
            pool.shutdown()
            client.close()
    return 0


def stream(client: KubeClient, namespace: str, args: argparse.Namespace,
           pool: ThreadPoolExecutor, created: dict[str, float]) -> None:
    """Start one gang every ``1 / rate`` seconds for ``duration``; a gang whose creation
    overruns its slot delays the next (printed: the stream was not steady)."""
    period, start = 1.0 / args.rate, time.monotonic()
    late, index = 0, 0
    threads: list[threading.Thread] = []
    lock = threading.Lock()

    def one(name: str) -> None:
        done = create_job(client, namespace, namespace,
                          [f"{name}-{i}" for i in range(args.gang_size)], 1, pool, group=name,
                          annotations={RUNTIME_ANNOTATION: f"{args.runtime:g}"})
        with lock:
            created[name] = done

    while (due := start + index * period) < start + args.duration:
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        elif wait < -period:
            late += 1
        t = threading.Thread(target=one, args=(f"g-{index:05d}",), daemon=True)
        t.start()
        threads.append(t)
        index += 1
    for t in threads:
        t.join()
    if late:
        print(f"  {late} gangs started more than one period late (the creator fell behind)")


def report(created: dict[str, float], watch: BindWatch, buckets: list[tuple[float, float]],
           args: argparse.Namespace, fill: float, peak_mib: float) -> None:
    latencies, unbound = [], 0
    for name, last_created in created.items():
        binds = [watch.bound.get(f"{name}-{i}") for i in range(args.gang_size)]
        if any(b is None for b in binds):
            unbound += 1
            continue
        latencies.append(max(b for b in binds if b is not None) - last_created)
    print(f"{args.nodes} kwok nodes x {args.gpus} GPUs; {len(created)} gangs of "
          f"{args.gang_size} one-GPU pods at {args.rate:g}/s for {args.duration:g}s, each "
          f"running {args.runtime:g}s (steady fill {fill:.0%}); {load()}")
    if latencies:
        print(f"last member created -> last member bound (watch): p50 "
              f"{statistics.median(latencies):.3f}s, p99 {quantile(latencies, 0.99):.3f}s, "
              f"max {max(latencies):.3f}s over {len(latencies)} gangs "
              f"(target p99 < 0.5 s){f'; {unbound} not all bound' if unbound else ''}")
    print(f"{HISTOGRAM}: p50 {bucket_quantile(buckets, 0.5):.3f}s, "
          f"p99 {bucket_quantile(buckets, 0.99):.3f}s (bucket interpolation, "
          f"{buckets[-1][1] if buckets else 0:.0f} gangs); scheduler peak RSS {peak_mib:.0f} MiB")


if __name__ == "__main__":
    sys.exit(main())
