"""gang-scheduler against kube-scheduler on the same apiserver, kwok nodes and pods, in one run.

As a new user would measure it: ``--pods`` pending one-CPU pods exist first, then the
scheduler's process starts, and a watch of ours stamps every bind. Contenders, one after the
other, each on its own namespace of identical pods. The earlier contenders' pods stay bound
(deleting 10,000 pods took minutes here), so each contender starts on a cluster with more
pods than the one before: the order below puts gang-scheduler last, where that weighs most
(``--delete-between`` deletes them instead). ``bench_fair.py`` is the fair comparison: the
same cluster content for every contender, alternating order, repeated rounds, medians and
the apiserver's raw bind limit:

- ``kube``:          kube-scheduler v1.36.3 (the dev cluster's binary, its default plugins) with
                     its shipped client limits (QPS 50, burst 100);
- ``kube-fast``:     the same with QPS/burst ``--fast-qps`` (5000: unthrottled);
- ``gang-lone``:     ``gang-scheduler run`` with lone pods (each its own gang of one);
- ``gang-groups``:   ``gang-scheduler run`` with PodGroups of ``--gang-size``.

Printed per contender: start-up (process start -> first bind), pods/s from process start and
from the first bind, the CPU seconds of the scheduler, apiserver, etcd and kwok meanwhile,
the scheduler's peak RSS; then the ratios the issue's targets name (throughput from process
start >= 1.5x ``kube-fast``, start-up <= 2x ``kube-fast``'s). No assertions.

    .venv/bin/python benchmarks/bench_versus.py                      # 1,000 nodes, 10,000 pods
    .venv/bin/python benchmarks/bench_versus.py --nodes 200 --pods 2000 \
        --contenders kube-fast,gang-groups
    .venv/bin/python benchmarks/bench_versus.py --state-dir /tmp/dc    # a running dev cluster
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench_kwok import (
    BindWatch,
    Usage,
    bench_nodes,
    cluster_cpu,
    create_namespace,
    delete_pods,
    kwok_session,
    load,
    say,
    start_kube_scheduler,
    usage,
)
from bench_scheduler_setup import (
    create_groups,
    create_pods,
    create_queue,
    spawn_scheduler,
    summarize_log,
)

from scheduler.kube.client import KubeClient
from scheduler.run.logconfig import configure_logging
from scheduler.tools.devcluster import procs
from scheduler.tools.devcluster.cluster import DevCluster

CONTENDERS = ("kube", "kube-fast", "gang-lone", "gang-groups")


def contender_arguments(parser: argparse.ArgumentParser, *, pods: int, pods_help: str,
                        contenders: str, contenders_help: str) -> None:
    """The options ``run_contender`` reads, and the cluster's and the work directory's: the
    same in every benchmark that runs ``CONTENDERS`` (this one, ``bench_fair``)."""
    parser.add_argument("--state-dir", help="a running dev cluster (default: start one)")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--pods", type=int, default=pods, help=pods_help)
    parser.add_argument("--gang-size", type=int, default=8)
    parser.add_argument("--contenders", default=contenders,
                        help=f"comma-separated{contenders_help} (of {', '.join(CONTENDERS)})")
    parser.add_argument("--fast-qps", type=float, default=5000.0,
                        help="kube-fast's client QPS and burst")
    parser.add_argument("--concurrency", type=int, default=32,
                        help="gang-scheduler's bindConcurrency; the pod-creating threads")
    parser.add_argument("--stall", type=float, default=120.0,
                        help="give a contender up when no pod was bound for this many seconds")
    parser.add_argument("--workdir", help="where gang-scheduler's config and logs go")


def chosen_contenders(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """``--contenders`` as a list; an unknown name, or PodGroups that do not divide
    ``--pods``, is a usage error."""
    contenders = [c for c in args.contenders.split(",") if c]
    if unknown := set(contenders) - set(CONTENDERS):
        parser.error(f"--contenders: unknown {', '.join(sorted(unknown))} "
                     f"(known: {', '.join(CONTENDERS)})")
    if "gang-groups" in contenders and args.pods % args.gang_size:
        parser.error(f"--pods {args.pods} is not a multiple of --gang-size {args.gang_size}")
    return contenders


def rotated(contenders: Sequence[str], round_no: int) -> list[str]:
    """Round *round_no*'s order: the list rotated by one per round, so each contender goes
    first, in the middle and last as often as the rounds allow (a contender always first
    would always see the fewest pods the earlier ones left)."""
    shift = round_no % len(contenders)
    return [*contenders[shift:], *contenders[:shift]]


@dataclass(frozen=True, slots=True)
class Result:
    contender: str
    pods: int
    bound: int
    launched: float  # epoch seconds: just before the process was started
    first: float
    last: float
    scheduler: Usage
    cluster_cpu_s: dict[str, float]

    @property
    def startup_s(self) -> float:
        return self.first - self.launched

    @property
    def from_start(self) -> float:
        return self.bound / (self.last - self.launched)

    @property
    def from_first(self) -> float:
        return (self.bound - 1) / (self.last - self.first) if self.last > self.first else 0.0


def run_contender(cluster: DevCluster, client: KubeClient, contender: str,
                  pool: ThreadPoolExecutor, args: argparse.Namespace,
                  workdir: Path, namespace: str = "") -> Result | None:
    """Create the pods in *namespace* (default: a fresh one named after the contender), start
    the contender, watch until all are bound; then clean up."""
    namespace = namespace or f"{contender}-{uuid.uuid4().hex[:5]}"
    create_namespace(client, namespace)
    gang = contender.startswith("gang")
    scheduler_name = "gang-scheduler" if gang else f"bench-{contender}"
    size = args.gang_size if contender == "gang-groups" else 0
    if gang:
        create_queue(client, namespace, namespace, args.nodes * args.gpus)
    t0 = time.monotonic()
    create_pods(client, namespace, args.pods, pool, prefix="p", scheduler_name=scheduler_name,
                gpus=0, gang_size=size, queue=namespace if gang else "")
    if size:
        create_groups(client, namespace, args.pods // size, size, pool)
    say(f"{contender}: {args.pods} pods created in {time.monotonic() - t0:.1f}s; {load()}")
    with BindWatch(client, namespace) as watch:
        before = cluster_cpu(cluster)
        launched = time.time()
        pid, alive, stop = launch(cluster, contender, scheduler_name, args, workdir, namespace)
        try:
            complete = watch.wait(args.pods, args.stall, alive)
            used = usage(pid)
            if not alive():
                say(f"{contender}: its process exited before it was measured (CPU and RSS "
                    f"unknown); see {workdir / contender}")
            after = cluster_cpu(cluster)
        finally:
            stop()
    bound = len(watch.bound)
    say(f"{contender}: {bound} of {args.pods} bound{'' if complete else ' (stalled)'}; {load()}")
    if gang:
        summarize_log(workdir / contender / "scheduler.log")
    if args.delete_between:
        t0 = time.monotonic()
        delete_pods(client, namespace, pool)
        say(f"{contender}: pods deleted in {time.monotonic() - t0:.1f}s")
    if not bound:
        return None
    first, last = watch.span()
    spent = {k: after[k] - before.get(k, 0.0) for k in after}
    return Result(contender, args.pods, bound, launched, first, last, used, spent)


def launch(cluster: DevCluster, contender: str, scheduler_name: str, args: argparse.Namespace,
           workdir: Path, namespace: str) -> tuple[int, Callable[[], bool], Callable[[], None]]:
    """Start the contender's process: (pid, is-alive, stop)."""
    if contender.startswith("kube"):
        qps, burst = ((args.fast_qps, int(args.fast_qps)) if contender == "kube-fast"
                      else (None, None))
        proc = start_kube_scheduler(cluster, f"bench-{contender}", scheduler_name, qps, burst)

        def stop_kube() -> None:
            procs.stop(proc)

        return proc.pid, lambda: procs.is_alive(proc), stop_kube
    (workdir / contender).mkdir(parents=True, exist_ok=True)
    popen, _log, _port = spawn_scheduler(str(cluster.kubeconfig), workdir / contender,
                                         namespace, args.concurrency)

    def stop() -> None:
        popen.terminate()
        popen.wait(timeout=60)

    return popen.pid, lambda: popen.poll() is None, stop


def report(results: list[Result], header: bool = True) -> None:
    """One row per contender; under all of them, the ratios against ``kube-fast``."""
    if header:
        print(f"{'contender':<12} {'bound':>6} {'start-up s':>10} {'pods/s start':>12} "
              f"{'pods/s 1st':>10} {'sched cpu s':>11} {'peak MiB':>8}  cluster cpu s")
    for r in results:
        spent = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r.cluster_cpu_s.items()) if v >= 0.05)
        print(f"{r.contender:<12} {r.bound:>6} {r.startup_s:>10.2f} {r.from_start:>12.1f} "
              f"{r.from_first:>10.1f} {r.scheduler.cpu_s:>11.1f} {r.scheduler.peak_rss_mib:>8.0f}"
              f"  {spent}")
    by = {r.contender: r for r in results}
    base = by.get("kube-fast")
    if base is None:
        return
    for name in ("gang-lone", "gang-groups"):
        if (got := by.get(name)) is not None:
            r = got
            print(f"{name} / kube-fast: throughput from process start "
                  f"{r.from_start / base.from_start:.2f}x (target >= 1.5), "
                  f"from first bind {r.from_first / base.from_first:.2f}x, "
                  f"start-up {r.startup_s / base.startup_s:.2f}x (target <= 2)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    contender_arguments(parser, pods=10000, pods_help="pods per contender",
                        contenders=",".join(CONTENDERS), contenders_help=", in this order")
    parser.add_argument("--delete-between", action="store_true",
                        help="delete each contender's pods before the next starts")
    parser.add_argument("--existing-nodes", action="store_true",
                        help="create no nodes: --nodes of the bench pool are already there "
                        "(a --state-dir cluster a previous run filled)")
    args = parser.parse_args(argv)
    contenders = chosen_contenders(parser, args)
    configure_logging("warning")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-versus-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with kwok_session(args.state_dir, args.concurrency,
                      max(64, args.concurrency * 2)) as (cluster, client, pool):
        run = uuid.uuid4().hex[:5]
        bench_nodes(client, args, pool, run)
        print(f"{client.get_json('/version')['gitVersion']}, {args.nodes} kwok nodes x "
              f"{args.gpus} GPUs, {args.pods} one-CPU pods per contender, gangs of "
              f"{args.gang_size}; {load()}")
        results: list[Result] = []
        for contender in contenders:
            result = run_contender(cluster, client, contender, pool, args, workdir)
            if result is not None:
                results.append(result)
                report(results[-1:], header=len(results) == 1)
        print()
        report(results)
        print(f"({load()}; gang-scheduler logs in {workdir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
