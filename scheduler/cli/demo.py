"""`gang-scheduler demo`: see it work in one command (scheduler/tools/demo/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scheduler.cli._args import number, output_dir_problem

EPILOG = """\
what it does:
  builds or reuses etcd + kube-apiserver (Go, first run only), starts them on loopback with
  fake a100 and h100 nodes (scheduler/examples/demo/cluster.yaml), creates two team queues
  under one parent (queues.yaml), runs the scheduler in this process, submits the jobs of
  jobs.yaml over time (a would-be deadlock, a reservation with backfill, a preemption) and
  shows queues, gangs and nodes live until every job finished. Then it prints a summary and
  stops the cluster (also on Ctrl-C). About 80 s at --speed 1 once the binaries are built.

examples:
  gang-scheduler demo
  gang-scheduler demo --speed 3 --no-live      # plain lines, for CI logs
  gang-scheduler demo --keep                   # leave the cluster up to poke at
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="run a live demo on a local control plane",
                       description="Start a local cluster with fake GPU nodes, run the "
                       "scheduler and two teams' jobs, and watch it live.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--speed", type=number(positive=True), default=1.0, metavar="X",
                   help="divide every runtime and delay by X (default 1)")
    p.add_argument("--no-live", dest="live", action="store_false",
                   help="print plain event lines instead of the live view")
    p.add_argument("--keep", action="store_true",
                   help="leave the cluster running afterwards (in the dev-cluster state dir)")
    p.add_argument("--timeout", type=number(positive=True), default=600.0, metavar="SECONDS",
                   help="give up if the jobs have not all finished by then (default 600)")
    p.add_argument("--state-dir", type=Path, metavar="DIR",
                   help="where the cluster keeps its files (default: a temporary directory)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from scheduler.tools.demo import session

    if args.state_dir is not None and (problem := output_dir_problem(args.state_dir)):
        print(f"error: --state-dir {args.state_dir}: {problem}", file=sys.stderr)
        return 2
    opts = session.Options(speed=args.speed, live=args.live, keep=args.keep,
                           timeout_s=args.timeout, state_dir=args.state_dir)
    console = Console()
    if not console.is_terminal:  # a CI log or a pipe: no 80-column wrapping of event lines
        console = Console(width=120)
    return session.run(opts, console)
