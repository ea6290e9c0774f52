"""What an idle scheduler costs: decision cycles, CPU seconds and ``FailedScheduling`` event
series over a quiet minute, with gangs waiting and nothing changing.

On a throwaway dev cluster (kwok nodes, no training operators): ``--nodes`` nodes of 8 GPUs,
all taken by one running gang, and ``--gangs`` PodGroups of 2 x 8 GPUs that wait for them.
``gang-scheduler run`` starts as its own process, from this checkout or from ``--checkout``
(another checkout with its own ``.venv``, to compare two versions on the same cluster code),
with the shipped defaults (events at most once a minute per series). Once every waiting pod
has its ``FailedScheduling`` event and ``--settle`` seconds have passed, the script reads,
before and after ``--seconds`` quiet seconds: ``gang_scheduler_cycles_total``, the process's
CPU seconds (``/proc``), and the waiting pods' ``FailedScheduling`` events (how many, and
the sum of their series counts, what ``kubectl describe`` shows as "xN over ...").

    .venv/bin/python benchmarks/bench_idle.py
    .venv/bin/python benchmarks/bench_idle.py --checkout /tmp/base     # another version

Measured on the shared 2-core dev VM, 2026-12-04, over one quiet minute (defaults):

    main d2137a4 (load 4.9): 1,073 cycles, 2.44 CPU s, series counts +21,564 (20 events)
    after the idle work (load 1.7): 0 cycles, 0.05 CPU s, series counts +0 (20 events)

(main from ``git worktree add /tmp/base-h1 d2137a4`` with a venv of its own.)

No assertions: ``tests/e2e/test_idle.py`` asserts that nothing happens.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_kwok import create_job, create_namespace, create_nodes, kwok_cluster, load, say
from bench_scheduler_setup import cpu_seconds, create_queue, die_with_parent, metric

from scheduler.kube.client import KubeClient, connect
from scheduler.run.logconfig import configure_logging
from scheduler.tools.devcluster import procs

GANG = 2  # pods per gang, 8 GPUs each: a gang needs two whole nodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the gang-scheduler checkout to run (with its own .venv)")
    parser.add_argument("--gangs", type=int, default=10, help="waiting gangs")
    parser.add_argument("--nodes", type=int, default=2, help="8-GPU nodes, all busy")
    parser.add_argument("--settle", type=float, default=20.0,
                        help="seconds after every waiting pod was told why, before measuring")
    parser.add_argument("--seconds", type=float, default=60.0, help="the quiet span measured")
    parser.add_argument("--state-dir", help="a running dev cluster (default: start one)")
    parser.add_argument("--workdir", help="where the scheduler's config and log go")
    args = parser.parse_args(argv)
    configure_logging("warning")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-idle-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with kwok_cluster(args.state_dir) as cluster:
        client = connect(str(cluster.kubeconfig), pool_maxsize=16)
        pool = ThreadPoolExecutor(max_workers=8)
        run = uuid.uuid4().hex[:5]
        namespace = f"idle-{run}"
        try:
            create_nodes(client, [f"kwok-{run}-{i}" for i in range(args.nodes)], 8, pool)
            create_namespace(client, namespace)
            create_queue(client, namespace, namespace, 8 * args.nodes * (args.gangs + 1))
            proc, log, port = spawn(args.checkout, str(cluster.kubeconfig), workdir, namespace)
            say(f"scheduler {args.checkout} ready (pid {proc.pid}, log {log}); {load()}")
            busy = [f"busy-{i}" for i in range(args.nodes)]
            create_job(client, namespace, namespace, busy, 8, pool, group="busy")
            wait(lambda: bound(client, namespace) == len(busy), 120, "the busy gang bound")
            waiting = [f"w{g:02d}-{i}" for g in range(args.gangs) for i in range(GANG)]
            for g in range(args.gangs):
                create_job(client, namespace, namespace, waiting[g * GANG:(g + 1) * GANG], 8,
                           pool, group=f"w{g:02d}")
            wait(lambda: set(waiting) <= set(told(client, namespace)), 120,
                 "every waiting pod's FailedScheduling event")
            time.sleep(args.settle)
            before = sample(client, namespace, waiting, proc.pid, port)
            say(f"measuring {args.seconds:.0f} quiet seconds; {load()}")
            time.sleep(args.seconds)
            after = sample(client, namespace, waiting, proc.pid, port)
            proc.terminate()
            proc.wait(timeout=60)
        finally:
            pool.shutdown()
            client.close()
    report(args, before, after)
    return 0


def spawn(checkout: Path, kubeconfig: str, workdir: Path,
          queue: str) -> tuple[subprocess.Popen[bytes], Path, int]:
    """``gang-scheduler run`` of *checkout*, as deployed (shipped defaults, its own
    interpreter); returns once its caches are synced."""
    config = workdir / "config.yaml"
    config.write_text(f"defaultQueue: {queue}\nlogLevel: info\n")
    port = procs.free_port()
    log = workdir / "scheduler.log"
    proc = subprocess.Popen(
        [str(checkout / ".venv" / "bin" / "python"), "-m", "scheduler.cli.main", "run",
         "--kubeconfig", kubeconfig, "--config", str(config), "--no-leader-election",
         "--log-format", "json", "--metrics-address", f"127.0.0.1:{port}"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=checkout,
        preexec_fn=die_with_parent)
    wait(lambda: proc.poll() is None and ready(port), 300, "scheduler ready",
         lambda: proc.poll() is None)
    return proc, log, port


def ready(port: int) -> bool:
    try:
        metric(port, "gang_scheduler_cycles_total")
    except OSError:
        return False
    return True


def wait(done: Any, timeout_s: float, what: str, alive: Any = lambda: True) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if not alive():
            raise SystemExit(f"the scheduler exited while waiting for {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"no {what} within {timeout_s:.0f}s")
        time.sleep(0.5)


def bound(client: KubeClient, namespace: str) -> int:
    pods = client.get_json(f"/api/v1/namespaces/{namespace}/pods")["items"]
    return sum(1 for p in pods if p["spec"].get("nodeName"))


def told(client: KubeClient, namespace: str) -> dict[str, tuple[int, int]]:
    """Pod name -> (FailedScheduling events, the sum of their series counts)."""
    events = client.get_json(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    out: dict[str, tuple[int, int]] = {}
    for e in events:
        regarding = e.get("regarding") or {}
        if e.get("reason") != "FailedScheduling" or regarding.get("kind") != "Pod":
            continue
        count = int((e.get("series") or {}).get("count") or e.get("deprecatedCount") or 1)
        n, total = out.get(regarding["name"], (0, 0))
        out[regarding["name"]] = (n + 1, total + count)
    return out


def sample(client: KubeClient, namespace: str, waiting: list[str], pid: int,
           port: int) -> dict[str, float]:
    events = told(client, namespace)
    return {"cycles": metric(port, "gang_scheduler_cycles_total"), "cpu": cpu_seconds(pid),
            "events": sum(events.get(n, (0, 0))[0] for n in waiting),
            "series": sum(events.get(n, (0, 0))[1] for n in waiting), "at": time.monotonic()}


def report(args: argparse.Namespace, before: dict[str, float],
           after: dict[str, float]) -> None:
    span = after["at"] - before["at"]
    print(f"idle scheduler ({args.checkout}): {args.gangs} gangs of {GANG} x 8 GPUs waiting "
          f"on {args.nodes} busy nodes, over {span:.0f} s; {load()}")
    for key, label in (("cycles", "decision cycles (gang_scheduler_cycles_total)"),
                       ("cpu", "scheduler CPU seconds"),
                       ("events", "FailedScheduling events of the waiting pods"),
                       ("series", "their series counts, summed")):
        delta = after[key] - before[key]
        fmt = ".2f" if key == "cpu" else ".0f"
        print(f"  {label}: {before[key]:{fmt}} -> {after[key]:{fmt}} (+{delta:{fmt}})")


if __name__ == "__main__":
    sys.exit(main())
