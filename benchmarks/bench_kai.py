"""KAI-Scheduler's published scale scenarios, run against gang-scheduler on kwok nodes.

KAI's scale tests (500 kwok nodes; figures as the issue quotes them) and what runs here, in
this order, on ``--nodes`` kwok nodes of 8 GPUs with ``gang-scheduler run`` already up:

1. one 512-pod distributed job (KAI: bound in 48.7 s): a PodGroup of 512 one-GPU pods;
   timed from its last member created to its last member bound;
2. a distributed job that cannot fit (KAI: marked unschedulable after 249.5 s): a PodGroup
   of ``nodes + 1`` pods of 8 GPUs; timed from its last member created to the last of its
   pods reported ``PodScheduled=False`` reason ``Unschedulable`` (members created earlier are
   so marked at once, as waiting for the rest);
   (both jobs are then deleted)
3. cluster fill (KAI: 4,000 single-GPU jobs in 6 min 38 s): ``nodes x 8`` one-GPU pods, each
   its own job, created while the scheduler runs; timed from the first creation to the last
   bind (their creation time is printed too: our creator is part of that figure);
4. reclaim one GPU (KAI: 13.9 s on average): the fill above belongs to queue ``a``, which
   has no quota and borrows every GPU from its sibling ``b``; ``--reclaims`` times, one
   one-GPU pod of ``b`` is created and timed to its bind, which needs a pod of ``a`` evicted
   (grace ``--grace`` seconds) and gone first.

Timed by a watch of ours, as in the other kwok benchmarks. No assertions.

    .venv/bin/python benchmarks/bench_kai.py                  # 500 nodes
    .venv/bin/python benchmarks/bench_kai.py --nodes 100 --gang 96 --reclaims 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_kwok import (
    BindWatch,
    create_job,
    create_namespace,
    create_nodes,
    delete_pods,
    kwok_cluster,
    load,
    say,
    usage,
)
from bench_scheduler_setup import GPU, POOL, start_scheduler

from scheduler.kube.client import KubeClient, connect
from scheduler.run.logconfig import configure_logging

QUEUES = "/apis/gangscheduler.io/v1alpha1/queues"


def queue(client: KubeClient, name: str, parent: str | None, namespace: str | None,
          gpus: int | None) -> None:
    spec: dict[str, Any] = {"namespaces": [namespace] if namespace else []}
    if parent:
        spec["parent"] = parent
    if gpus is not None:
        spec["quotas"] = [{"pool": POOL, "nominal": {GPU: gpus}}]
        spec["preemption"] = {"reclaimFromOthers": "Any"}
    reply = client.request("POST", QUEUES, body={
        "apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
        "metadata": {"name": name}, "spec": spec})
    if not reply.ok:
        raise RuntimeError(f"queue {name}: HTTP {reply.status}: {reply.message()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", help="a running dev cluster (default: start one)")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--gang", type=int, default=512, help="pods of the distributed job")
    parser.add_argument("--reclaims", type=int, default=5)
    parser.add_argument("--grace", type=int, default=0,
                        help="eviction grace period (seconds) of the reclaim victims")
    parser.add_argument("--stall", type=float, default=300.0)
    parser.add_argument("--workdir", help="where the scheduler's config and log go")
    args = parser.parse_args(argv)
    if args.gang > args.nodes * 8:
        parser.error(f"--gang {args.gang} one-GPU pods do not fit on {args.nodes} x 8 GPUs")
    configure_logging("warning")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-kai-"))
    workdir.mkdir(parents=True, exist_ok=True)
    gpus = args.nodes * 8
    with kwok_cluster(args.state_dir) as cluster:
        client = connect(str(cluster.kubeconfig), pool_maxsize=64)
        pool = ThreadPoolExecutor(max_workers=32)
        run = uuid.uuid4().hex[:5]
        ns_a, ns_b = f"kai-a-{run}", f"kai-b-{run}"
        try:
            t0 = time.monotonic()
            create_nodes(client, [f"kai-{run}-{i:04d}" for i in range(args.nodes)], 8, pool)
            say(f"{args.nodes} kwok nodes Ready in {time.monotonic() - t0:.1f}s; {load()}")
            for ns in (ns_a, ns_b):
                create_namespace(client, ns)
            queue(client, f"kai-{run}", None, None, None)
            queue(client, f"kai-a-{run}", f"kai-{run}", ns_a, 0)
            queue(client, f"kai-b-{run}", f"kai-{run}", ns_b, gpus)
            proc, log, _port = start_scheduler(
                str(cluster.kubeconfig), workdir, ns_a, 32,
                f"evictionGracePeriodSeconds: {args.grace}\n")
            say(f"scheduler ready (pid {proc.pid}, log {log}); {load()}")
            print(f"{args.nodes} kwok nodes x 8 GPUs; {load()}")
            with BindWatch(client, ns_a) as watch_a, BindWatch(client, ns_b) as watch_b:
                big = [f"big-{i:04d}" for i in range(args.gang)]
                created = create_job(client, ns_a, f"kai-a-{run}", big, 1, pool, group="big")
                watch_a.wait(big, args.stall)
                if all(n in watch_a.bound for n in big):
                    print(f"1. one {args.gang}-pod job: last member created -> last bound "
                          f"{max(watch_a.bound[n] for n in big) - created:.2f}s "
                          f"(KAI: 48.7 s); {load()}")
                else:
                    print(f"1. one {args.gang}-pod job: not all bound in time")
                huge = [f"huge-{i:04d}" for i in range(args.nodes + 1)]
                created = create_job(client, ns_b, f"kai-b-{run}", huge, 8, pool, group="huge")
                deadline = time.monotonic() + args.stall
                while not all(n in watch_b.unschedulable for n in huge):
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                # Members are marked while the gang is still incomplete (waiting for the
                # others); the last one created is marked only once the whole gang was tried.
                marked = [watch_b.unschedulable.get(n) for n in huge]
                print(f"2. a {len(huge)} x 8-GPU job that cannot fit: every member marked "
                      "Unschedulable "
                      + (f"{max(m for m in marked if m) - created:.2f}s after its last member "
                         "was created" if all(marked) else "not within --stall")
                      + f" (KAI: 249.5 s); {load()}")
                for ns in (ns_a, ns_b):
                    delete_pods(client, ns, pool)
                fill(client, ns_a, f"kai-a-{run}", gpus, pool, watch_a, args)
                reclaim(client, ns_b, f"kai-b-{run}", pool, watch_b, args)
            print(f"scheduler peak RSS {usage(proc.pid).peak_rss_mib:.0f} MiB; {load()}")
            proc.terminate()
            proc.wait(timeout=60)
        finally:
            pool.shutdown()
            client.close()
    return 0


def fill(client: KubeClient, namespace: str, queue_name: str, count: int,
         pool: ThreadPoolExecutor, watch: BindWatch, args: argparse.Namespace) -> None:
    names = [f"fill-{i:05d}" for i in range(count)]
    start = time.time()
    created = create_job(client, namespace, queue_name, names, 1, pool)
    watch.wait(names, args.stall)
    done = [watch.bound[n] for n in names if n in watch.bound]
    print(f"3. cluster fill: {len(done)} of {count} one-GPU jobs bound "
          f"{max(done) - start:.1f}s after the first was created (creating them took "
          f"{created - start:.1f}s) (KAI: 4,000 in 398 s); {load()}")


def reclaim(client: KubeClient, namespace: str, queue_name: str, pool: ThreadPoolExecutor,
            watch: BindWatch, args: argparse.Namespace) -> None:
    times = []
    for i in range(args.reclaims):
        name = f"reclaim-{i}"
        created = create_job(client, namespace, queue_name, [name], 1, pool)
        if watch.wait([name], args.stall):
            times.append(watch.bound[name] - created)
    if times:
        print(f"4. reclaim one GPU: {statistics.mean(times):.2f}s on average over {len(times)} "
              f"(min {min(times):.2f}s, max {max(times):.2f}s; eviction grace {args.grace}s) "
              f"(KAI: 13.9 s); {load()}")
    else:
        print("4. reclaim one GPU: no reclaim completed within --stall")


if __name__ == "__main__":
    sys.exit(main())
