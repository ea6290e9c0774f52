"""`gang-scheduler queues | gangs | top`: the scheduler's queues and gangs on any cluster.

Two sources, one set of rows (scheduler/views/):

- through the apiserver (the default, with your kubeconfig): what your RBAC lets you read.
  Queue status and the reasons the scheduler wrote on pending pods; with ``-n`` only those
  namespaces are read, so a tenant with namespace RBAC sees their gangs and the queues that
  admit them; nodes only if you may list them;
- ``--scheduler URL``: the scheduler's own ``/api/v1/state`` (its last cycle: node grid,
  reservations, recent preemptions), e.g. after
  ``kubectl -n gang-scheduler-system port-forward svc/gang-scheduler-metrics 8080``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

from scheduler.cli._args import integer, number
from scheduler.cli._kube import CONTEXT_HELP, KUBECONFIG_HELP

if TYPE_CHECKING:
    from scheduler.views.state import ClusterView

EPILOG = """\
examples:
  gang-scheduler queues                          # every queue: quota, usage, shares per pool
  gang-scheduler gangs -n team-a                 # team-a's pending gangs (position, reason,
                                                 # ETA) and running gangs (age, rank -> node)
  gang-scheduler gangs -n team-a -o yaml
  gang-scheduler top --scheduler http://127.0.0.1:8080   # the live view, from the scheduler
  kubectl gang gangs -n team-a                   # the same, as a kubectl plugin
"""

SUMMARIES = {
    "queues": "queues as a tree: GPUs in use, nominal, borrowed and lent per pool, shares",
    "gangs": "pending gangs in order with position, reason and ETA; running gangs and ranks; "
             "each failing gang's last failures",
    "top": "queues, gangs and nodes, refreshed (the demo's live view, on any cluster)",
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, summary in SUMMARIES.items():
        p = sub.add_parser(name, help=summary, description=f"{summary}.\n\n{__doc__}",
                           epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("-n", "--namespace", action="append", default=[], metavar="NS",
                       help="only these namespaces (repeat, or NS1,NS2); default: all")
        p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
        p.add_argument("--kubeconfig", metavar="FILE", help=KUBECONFIG_HELP)
        p.add_argument("--context", metavar="NAME", help=CONTEXT_HELP)
        p.add_argument("--config", metavar="FILE",
                       help="the scheduler's config file (scheduler name, labels)")
        p.add_argument("--scheduler", metavar="URL",
                       help="read the scheduler's own state from its HTTP endpoint instead")
        if name == "top":
            p.add_argument("--interval", type=number(positive=True), default=2.0, metavar="S",
                           help="seconds between refreshes (default: %(default)s)")
            p.add_argument("--iterations", type=integer(minimum=0), default=0, metavar="N",
                           help="stop after N refreshes (default: until Ctrl-C)")
        p.set_defaults(handler=run, view=name)


def namespaces_of(args: argparse.Namespace) -> list[str] | None:
    names = [n.strip() for item in args.namespace for n in item.split(",") if n.strip()]
    return names or None


def fetch(args: argparse.Namespace) -> ClusterView:
    """The view from the chosen source, cut to the namespaces asked for."""
    from scheduler.views.state import ClusterView

    namespaces = namespaces_of(args)
    if args.scheduler:
        url = args.scheduler.rstrip("/") + "/api/v1/state"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return ClusterView.from_dict(json.loads(resp.read())).for_namespaces(namespaces)
    from scheduler.cli._kube import connect
    from scheduler.kube.oneshot import read_visible
    from scheduler.run.config import load_config
    from scheduler.views import apiserver

    config = load_config(args.config)
    seen = read_visible(connect(args.kubeconfig, context=args.context), config, namespaces)
    now = time.time()
    inp = seen.cache.cycle_input(now)
    view = apiserver.build(inp.gangs, seen.cache.gang_pods, seen.conditions, seen.queues,
                           inp.snapshot if seen.nodes_readable else None, now,
                           seen.estimates, seen.pod_estimates, seen.positions,
                           failures=seen.cache)
    return view.for_namespaces(namespaces)


def render(view: ClusterView, kind: str, output: str) -> str | None:
    """Text for -o json/yaml (None: draw tables)."""
    if output == "table":
        return None
    doc = view.to_dict()
    if kind == "queues":
        doc = {"queues": doc["queues"]}
    elif kind == "gangs":
        doc = {"pending": doc["pending"], "running": doc["running"], "failed": doc["failed"]}
    if output == "json":
        return json.dumps(doc, indent=2)
    import yaml

    return yaml.safe_dump(doc, sort_keys=False)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from scheduler.cli._kube import ConnectError, unreachable
    from scheduler.kube.client import ApiError, TransportError
    from scheduler.run.config import ConfigError
    from scheduler.run.logconfig import configure_logging
    from scheduler.views import text

    configure_logging("error", "console")
    console = Console()
    iterations = getattr(args, "iterations", 1) or 0
    done = 0
    while True:
        try:
            view = fetch(args)
        except ConfigError as exc:
            print(f"error: --config {exc}", file=sys.stderr)
            return 2
        except ConnectError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except (TransportError, ApiError) as exc:
            hint = ("; pass -n NAMESPACE for the namespaces you may read"
                    if isinstance(exc, ApiError) and exc.status == 403
                    and namespaces_of(args) is None else "")
            print(f"error: {unreachable(exc)}{hint}", file=sys.stderr)
            return 1
        except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
            print(f"error: --scheduler {args.scheduler}: cannot read its state: {exc}",
                  file=sys.stderr)
            return 1
        out = render(view, args.view, args.output)
        if out is not None:
            print(out)
            return 0
        if args.view == "queues":
            console.print(text.queues_table(view))
        elif args.view == "gangs":
            console.print(text.gangs(view))
        else:
            if console.is_terminal:
                console.clear()
            console.print(text.top(view))
        done += 1
        if args.view != "top" or (iterations and done >= iterations):
            return 0
        try:
            time.sleep(args.interval)
        except KeyboardInterrupt:
            return 0
