"""A fair comparison with kube-scheduler: every contender starts on the same cluster content,
in alternating order over repeated rounds, measured against the apiserver's own bind limit.

Why not ``bench_versus``: there the contenders run one after the other and each one's pods
stay bound, so a later contender starts on a bigger cluster, and one run gives one sample.
Here:

- ``--nodes`` kwok nodes and a background of ``--bound`` one-CPU pods, bound directly with
  binding POSTs (no scheduler; namespace ``startup-bound``, shared with ``bench_startup``),
  are created once, as on a busy production cluster;
- the background settled: kwok marks the background pods Running a minute or two after
  their binds, and its status writes would compete with whatever is measured first;
- the limit: ``--pods`` pending pods bound by raw binding POSTs at each of
  ``--concurrencies`` (no scheduling logic: ``bench_bind.raw_bind``), timed to the last
  binding reply, as a contender is timed to its last bind; the best rate is "the limit" of
  this apiserver with this Python client, and every throughput is read as a share of it
  (``--rounds 0`` measures the limit alone). Also printed: the rate to the last of those
  pods Running, what the apiserver and kwok sustain together (a burst of binds outruns
  kwok's status writes, which land after the clock stops in both figures of a contender);
- ``--rounds`` rounds; each round rotates the contenders' order by one. Per round and
  contender: ``--pods`` pending pods in a fresh namespace, the scheduler's process started,
  a watch stamping every bind, the process stopped, that namespace's pods, PodGroups and
  Queue deleted and the pods verified gone, so the next contender sees the same content.

Contenders: ``kube-fast`` (kube-scheduler, client QPS/burst ``--fast-qps``), ``gang-lone``
(gang-scheduler, lone pods), ``gang-groups`` (PodGroups of ``--gang-size``), optionally
``kube`` (kube-scheduler's shipped QPS 50/burst 100). Printed: per contender the median and
min-max over rounds of start-up (process start -> first bind), pods/s from process start and
from the first bind (the rate once binding runs), the scheduler's and the apiserver's CPU per
bound pod, the scheduler's peak RSS; then the ratios the targets name. Requests per pod are
not measured (the apiserver's counters do not tell one client from another). No assertions.

    .venv/bin/python benchmarks/bench_fair.py --nodes 500 --bound 5000 --pods 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench_bind import raw_bind
from bench_kwok import (
    bench_nodes,
    cluster_cpu,
    create_namespace,
    delete_pods,
    kwok_session,
    list_pages,
    load,
    say,
)
from bench_scheduler_setup import create_pods
from bench_startup import ensure_bound, settle_bound, wait_running
from bench_versus import (
    Result,
    chosen_contenders,
    contender_arguments,
    rotated,
    run_contender,
)

from scheduler.kube.client import KubeClient
from scheduler.run.logconfig import configure_logging
from scheduler.tools.devcluster.cluster import DevCluster

APISERVER = "kube-apiserver"
GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"
QUEUES = "/apis/gangscheduler.io/v1alpha1/queues"


def clean_up(client: KubeClient, namespace: str, pool: ThreadPoolExecutor) -> None:
    """Remove what a contender's round added: its pods (verified gone), PodGroups and Queue."""
    t0 = time.monotonic()
    delete_pods(client, namespace, pool, collection=True)
    client.request("DELETE", GROUPS.format(ns=namespace))
    client.request("DELETE", f"{QUEUES}/{namespace}")
    say(f"{namespace}: cleaned up in {time.monotonic() - t0:.1f}s")


@dataclass(frozen=True)
class Limit:
    """Raw binds at one concurrency: pods/s to the last binding reply and to the last pod
    Running (kwok's status writes done), and apiserver CPU ms per pod over the latter."""

    replied: float
    running: float
    cpu_ms: float


def bind_limit(cluster: DevCluster, client: KubeClient, pool: ThreadPoolExecutor,
               args: argparse.Namespace, concurrency: int) -> Limit:
    """``--pods`` pending pods bound by raw binding POSTs from *concurrency* threads, timed
    to the last reply and to the last pod Running."""
    namespace = f"limit-{uuid.uuid4().hex[:5]}"
    create_namespace(client, namespace)
    pods = create_pods(client, namespace, args.pods, pool, prefix="l", scheduler_name="nobody",
                       gpus=0)
    nodes = sorted(n["metadata"]["name"] for n in list_pages(client, "/api/v1/nodes")
                   if n["metadata"]["name"].startswith("kwok-"))
    plan = [(ref, nodes[i % len(nodes)]) for i, ref in enumerate(pods)]
    before = cluster_cpu(cluster).get(APISERVER, 0.0)
    with ThreadPoolExecutor(max_workers=concurrency) as binders:
        t0 = time.monotonic()
        failed = raw_bind(client, plan, binders)
        replied = time.monotonic() - t0
    pending = wait_running(client, namespace)
    running = time.monotonic() - t0
    spent = cluster_cpu(cluster).get(APISERVER, 0.0) - before
    if failed:
        say(f"limit at {concurrency}: {failed} binds failed")
    if pending > failed:
        say(f"limit at {concurrency}: {pending - failed} bound pods never marked Running")
    clean_up(client, namespace, pool)
    bound = len(plan) - failed
    return Limit(bound / replied, bound / running, spent / max(bound, 1) * 1000)


def spread(values: Sequence[float], fmt: str) -> str:
    """``median (min-max)`` of one figure over the rounds."""
    if not values:
        return "-"
    return (f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})")


FIGURES: dict[str, tuple[str, Callable[[Result], float]]] = {
    "start-up s": (".1f", lambda r: r.startup_s),
    "pods/s from start": (".1f", lambda r: r.from_start),
    "pods/s from 1st bind": (".1f", lambda r: r.from_first),
    "sched CPU ms/pod": (".1f", lambda r: r.scheduler.cpu_s / r.bound * 1000),
    "apiserver CPU ms/pod": (".1f", lambda r: r.cluster_cpu_s.get(APISERVER, 0.0) / r.bound
                             * 1000),
    "peak RSS MiB": (".0f", lambda r: r.scheduler.peak_rss_mib),
}


def median(results: Sequence[Result], figure: str) -> float:
    return statistics.median(FIGURES[figure][1](r) for r in results)


def report(results: dict[str, list[Result]], limit: float, pods: int) -> None:
    """Per contender and figure: median (min-max) over its complete rounds; then the ratios."""
    print(f"{'contender':<12} {'rounds':>6}  " + "  ".join(f"{f:>22}" for f in FIGURES)
          + "  share of limit (from start, from 1st bind)")
    complete = {c: [r for r in got if r.bound == pods] for c, got in results.items()}
    for contender, got in complete.items():
        cells = "  ".join(f"{spread([get(r) for r in got], fmt):>22}"
                          for fmt, get in FIGURES.values())
        share = (f"{median(got, 'pods/s from start') / limit:.0%}, "
                 f"{median(got, 'pods/s from 1st bind') / limit:.0%}" if got else "-")
        print(f"{contender:<12} {len(got):>3}/{len(results[contender]):<2}  {cells}  {share}")
    base = complete.get("kube-fast")
    if not base:
        return
    frugal = complete.get("kube") or base
    for name in ("gang-lone", "gang-groups"):
        if gang := complete.get(name):
            throughput = median(gang, "pods/s from start") / median(base, "pods/s from start")
            startup = median(gang, "start-up s") / median(base, "start-up s")
            cpu = median(gang, "sched CPU ms/pod") / median(frugal, "sched CPU ms/pod")
            print(f"{name} / kube-fast (medians): throughput from process start "
                  f"{throughput:.2f}x (target >= 1.5), start-up {startup:.2f}x (target <= 2), "
                  f"scheduler CPU per pod {cpu:.2f}x "
                  f"{'kube' if frugal is not base else 'kube-fast'}'s (target <= 1)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    contender_arguments(parser, pods=2000, pods_help="pending pods per contender",
                        contenders="kube-fast,gang-lone,gang-groups", contenders_help="")
    parser.add_argument("--existing-nodes", action="store_true",
                        help="create no nodes: --nodes of the bench pool are already there")
    parser.add_argument("--bound", type=int, default=30000,
                        help="background pods bound before anything is measured")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrencies", default="8,32,64",
                        help="thread counts of the raw bind limit; the best is the limit")
    args = parser.parse_args(argv)
    contenders = chosen_contenders(parser, args)
    try:
        concurrencies = [int(c) for c in args.concurrencies.split(",") if c]
    except ValueError:
        parser.error(f"--concurrencies: {args.concurrencies!r} is not a list of integers")
    if not concurrencies or min(concurrencies) < 1:
        parser.error("--concurrencies: give at least one thread count, each >= 1")
    args.delete_between = False  # run_contender's own deletion; clean_up does it here
    configure_logging("warning")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-fair-"))
    workdir.mkdir(parents=True, exist_ok=True)
    maxsize = max(64, args.concurrency * 2, max(concurrencies) * 2)
    with kwok_session(args.state_dir, args.concurrency, maxsize) as (cluster, client, pool):
        bench_nodes(client, args, pool, uuid.uuid4().hex[:5])
        ensure_bound(client, args.bound, pool)
        settle_bound(client)
        print(f"{client.get_json('/version')['gitVersion']}, {args.nodes} kwok nodes x "
              f"{args.gpus} GPUs, {args.bound} pods bound in the background, {args.pods} "
              f"pending one-CPU pods per contender and round, gangs of {args.gang_size}, "
              f"{args.rounds} rounds; {load()}")
        limits: dict[int, Limit] = {}
        for concurrency in concurrencies:
            got = limits[concurrency] = bind_limit(cluster, client, pool, args, concurrency)
            print(f"raw bind at concurrency {concurrency}: {got.replied:.1f} pods/s to the "
                  f"last binding reply ({got.running:.1f} to the last pod Running), "
                  f"apiserver CPU {got.cpu_ms:.1f} ms/pod; {load()}")
        best = max(limits, key=lambda c: limits[c].replied)
        limit = limits[best].replied
        print(f"the limit: {limit:.1f} pods/s (raw binding POSTs, concurrency {best}, "
              f"timed to the last binding reply; {limits[best].running:.1f} to the last "
              "pod Running)")
        results: dict[str, list[Result]] = {c: [] for c in contenders}
        for round_no in range(args.rounds):
            for contender in rotated(contenders, round_no):
                namespace = f"{contender}-r{round_no + 1}-{uuid.uuid4().hex[:4]}"
                result = run_contender(cluster, client, contender, pool, args,
                                       workdir / f"r{round_no + 1}", namespace)
                if result is not None:
                    results[contender].append(result)
                    print(f"round {round_no + 1} {contender}: {result.bound} bound, "
                          f"start-up {result.startup_s:.1f}s, {result.from_start:.1f} "
                          f"pods/s from start, " + ", ".join(
                              f"{name} {fmt_get[1](result):{fmt_get[0]}}"
                              for name, fmt_get in FIGURES.items()
                              if name not in ("start-up s", "pods/s from start"))
                          + f"; {load()}")
                clean_up(client, namespace, pool)
        print()
        report(results, limit, args.pods)
        print(f"({load()}; logs in {workdir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
