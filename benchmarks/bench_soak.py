"""Soak: hours of steady churn, and what the scheduler's memory and cycle time do meanwhile.

``gang-scheduler run`` (a child process, as deployed) schedules a stream of gangs on kwok nodes:
every ``1 / --rate`` seconds one PodGroup of ``--gang-size`` one-GPU pods arrives, kwok runs
each pod for ``--runtime`` seconds (``gangscheduler.io/simulated-runtime``) and marks it
Succeeded, and the script deletes finished gangs (PodGroup and pods) as a Job's TTL
controller would, so the cluster itself stays the same size and whatever grows is the
scheduler's. Every ``--sample`` seconds it prints the scheduler's resident memory (VmRSS),
its mean cycle time over the interval (``gang_scheduler_cycle_duration_seconds``), gangs
bound so far and pods alive; at the end the growth between the first and the last fifth of
the run, and a plot (a PNG, ``--plot``: RSS and cycle time over time).

    .venv/bin/python benchmarks/bench_soak.py                        # an hour, 1,000 nodes
    .venv/bin/python benchmarks/bench_soak.py --duration 1200 --plot /tmp/soak.png
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_kwok import (
    bench_nodes,
    create_job,
    create_namespace,
    kwok_cluster,
    list_pages,
    load,
    say,
    stream_arguments,
)
from bench_scheduler_setup import create_queue, metric, start_scheduler

from scheduler.kube.client import KubeClient, connect
from scheduler.run.logconfig import configure_logging

RUNTIME_ANNOTATION = "gangscheduler.io/simulated-runtime"
GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"


@dataclass(frozen=True, slots=True)
class Sample:
    at_s: float  # since the stream started
    rss_mib: float
    cycle_ms: float  # mean over the interval (NaN: no cycle ran)
    bound: int  # gangs bound so far (binds_total{result="success"})
    pods: int  # pods alive in the namespace


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    stream_arguments(parser, rate=1.0, runtime=60.0, duration=3600.0)
    parser.add_argument("--sample", type=float, default=15.0, help="seconds between samples")
    parser.add_argument("--plot", help="the PNG of RSS and cycle time over time "
                        "(default: soak.png in the workdir)")
    parser.add_argument("--workdir", help="where the scheduler's config, log and the plot go")
    parser.add_argument("--existing-nodes", action="store_true",
                        help="create no nodes: --nodes of the bench pool are already there")
    args = parser.parse_args(argv)
    configure_logging("warning")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    args.plot = args.plot or str(workdir / "soak.png")
    with kwok_cluster(args.state_dir) as cluster:
        client = connect(str(cluster.kubeconfig), pool_maxsize=64)
        pool = ThreadPoolExecutor(max_workers=max(8, args.gang_size * 2))
        run = uuid.uuid4().hex[:5]
        ns = f"soak-{run}"
        try:
            bench_nodes(client, args, pool, run)
            create_namespace(client, ns)
            create_queue(client, ns, ns, args.nodes * args.gpus)
            proc, log, port = start_scheduler(str(cluster.kubeconfig), workdir, ns, 32)
            say(f"scheduler ready (pid {proc.pid}, log {log}); {load()}")
            samples = soak(client, ns, args, pool, proc.pid, port)
            proc.terminate()
            proc.wait(timeout=60)
        finally:
            pool.shutdown()
            client.close()
    report(samples, args)
    return 0


def soak(client: KubeClient, ns: str, args: argparse.Namespace, pool: ThreadPoolExecutor,
         pid: int, port: int) -> list[Sample]:
    stop = threading.Event()
    arrivals = threading.Thread(target=arrive, args=(client, ns, args, pool, stop), daemon=True)
    start = time.monotonic()
    arrivals.start()
    samples: list[Sample] = []
    last = (metric(port, "gang_scheduler_cycle_duration_seconds_sum"),
            metric(port, "gang_scheduler_cycle_duration_seconds_count"))
    print(f"soak: {args.nodes} nodes, {args.rate:g} gangs/s of {args.gang_size} x 1 GPU, "
          f"{args.runtime:g} s each, {args.duration:g} s; {load()}")
    print("     t_s  rss_mib  cycle_ms  gangs_bound  pods_alive")
    while time.monotonic() - start < args.duration:
        stop.wait(args.sample)
        cleaned = clean(client, ns, pool)
        total = (metric(port, "gang_scheduler_cycle_duration_seconds_sum"),
                 metric(port, "gang_scheduler_cycle_duration_seconds_count"))
        cycles = total[1] - last[1]
        mean = (total[0] - last[0]) / cycles * 1000 if cycles else float("nan")
        last = total
        s = Sample(time.monotonic() - start, rss_mib(pid), mean,
                   int(metric(port, 'gang_scheduler_binds_total{result="success"}')), cleaned)
        samples.append(s)
        print(f"{s.at_s:8.0f} {s.rss_mib:8.1f} {s.cycle_ms:9.2f} {s.bound:12d} {s.pods:11d}",
              flush=True)
    stop.set()
    arrivals.join(timeout=30)
    return samples


def arrive(client: KubeClient, ns: str, args: argparse.Namespace, pool: ThreadPoolExecutor,
           stop: threading.Event) -> None:
    """One gang every ``1 / rate`` seconds until *stop*."""
    period, start, index = 1.0 / args.rate, time.monotonic(), 0
    while not stop.is_set():
        name = f"g-{index:06d}"
        create_job(client, ns, ns, [f"{name}-{i}" for i in range(args.gang_size)], 1, pool,
                   group=name, annotations={RUNTIME_ANNOTATION: f"{args.runtime:g}"})
        index += 1
        stop.wait(max(0.0, start + index * period - time.monotonic()))


def clean(client: KubeClient, ns: str, pool: ThreadPoolExecutor) -> int:
    """Delete the gangs whose every pod finished (their PodGroup and pods); pods left."""
    pods = list(list_pages(client, f"/api/v1/namespaces/{ns}/pods"))
    by_group: dict[str, list[dict[str, Any]]] = {}
    for p in pods:
        group = (p["metadata"].get("labels") or {}).get("scheduling.x-k8s.io/pod-group", "")
        by_group.setdefault(group, []).append(p)
    done = [g for g, members in by_group.items() if g and all(
        (m.get("status") or {}).get("phase") == "Succeeded" for m in members)]

    def delete(group: str) -> None:
        client.request("DELETE", f"{GROUPS.format(ns=ns)}/{group}")
        for m in by_group[group]:
            client.request("DELETE", f"/api/v1/namespaces/{ns}/pods/"
                           f"{m['metadata']['name']}", query={"gracePeriodSeconds": 0})

    list(pool.map(delete, done))
    return len(pods) - sum(len(by_group[g]) for g in done)


def window(values: list[float]) -> float:
    values = [v for v in values if v == v]  # without NaN
    return statistics.median(values) if values else float("nan")


def report(samples: list[Sample], args: argparse.Namespace) -> None:
    if len(samples) < 5:
        print("too few samples for a trend")
        return
    fifth = max(1, len(samples) // 5)
    first, end = samples[:fifth], samples[-fifth:]
    hours = (end[-1].at_s - first[0].at_s) / 3600
    rss0, rss1 = window([s.rss_mib for s in first]), window([s.rss_mib for s in end])
    cyc0, cyc1 = window([s.cycle_ms for s in first]), window([s.cycle_ms for s in end])
    print(f"gangs bound: {samples[-1].bound} in {samples[-1].at_s:.0f} s")
    print(f"RSS, median of the first and last fifth: {rss0:.1f} -> {rss1:.1f} MiB "
          f"({rss1 - rss0:+.1f} MiB, {(rss1 - rss0) / max(hours, 1e-9):+.1f} MiB/h); "
          f"max {max(s.rss_mib for s in samples):.1f} MiB")
    print(f"cycle time, median of the first and last fifth: {cyc0:.2f} -> {cyc1:.2f} ms")
    plot(samples, Path(args.plot), args)
    print(f"plot: {args.plot}")


def plot(samples: list[Sample], path: Path, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s.at_s / 60 for s in samples]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    top.plot(minutes, [s.rss_mib for s in samples], marker=".")
    top.set_ylabel("scheduler RSS (MiB)")
    top.set_ylim(bottom=0)
    bottom.plot(minutes, [s.cycle_ms for s in samples], marker=".", color="tab:orange")
    bottom.set_ylabel("mean cycle time (ms)")
    bottom.set_xlabel("minutes of churn")
    bottom.set_ylim(bottom=0)
    fig.suptitle(f"soak: {args.nodes} kwok nodes, {args.rate:g} gangs/s of {args.gang_size}, "
                 f"{args.runtime:g} s each")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
