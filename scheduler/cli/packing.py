"""`gang-scheduler packing`: how full GPU-sharing pods pack a cluster, policy by policy (the
FGD protocol on the openb traces; ``simulator.packing``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scheduler.cli._args import integer, output_dir_problem
from scheduler.cli._executor import add_ray_address, executor

EPILOG = """\
Pods are drawn from the pod list with a seed until they ask for 130% of the cluster's GPUs,
placed one by one (a fraction of a GPU on one GPU index, whole GPUs on free ones), never
leaving; the figure is the share of the cluster's GPUs allocated at each arrived load (the
protocol of Weng et al., "Beware of Fragmentation", USENIX ATC '23, whose published means
are printed and drawn beside).

examples:
  # the shipped sample (500 pods of openb's default list) on the whole openb cluster
  gang-scheduler packing --seeds 2

  # the paper's protocol on its default trace: 10 seeds, three policies, CSV, table, plot
  gang-scheduler packing --pods ../shared/traces/openb/openb_pod_list_default.csv \\
      --seeds 10 --out packing-default

  # the multi-GPU variant, fragmentation and best fit only
  gang-scheduler packing --pods ../shared/traces/openb/openb_pod_list_multigpu20.csv \\
      --policy fragmentation --policy best-fit --seeds 10 --out packing-multigpu20

  # the same runs on a Ray cluster (pip install 'gang-scheduler[ray]'; the head started
  # with `ray start --head` on 10.0.0.5): the files are byte for byte those of a local run
  gang-scheduler packing --pods ../shared/traces/openb/openb_pod_list_multigpu20.csv \\
      --policy fragmentation --policy best-fit --seeds 10 --out packing-multigpu20 \\
      --ray-address 10.0.0.5:6379

policies:
  random         a feasible node drawn uniformly (seeded)
  best-fit       the node left with the fewest free GPU shares, the tightest GPU
  fragmentation  the least added expected fragmentation under the pods' observed mix
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "packing", help="how full GPU-sharing pods (fractions, whole GPUs) pack a cluster",
        description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", default="openb-sample", metavar="FILE",
                   help="openb pod list (columns cpu_milli, memory_mib, num_gpu, gpu_milli, "
                   "optional gpu_spec), or a shipped sample by name (default: %(default)s)")
    p.add_argument("--nodes", default="openb-nodes", metavar="FILE",
                   help="openb node list (sn, cpu_milli, memory_mib, gpu, model), or a "
                   "shipped one by name (default: %(default)s: the paper's 1,523 nodes)")
    p.add_argument("--policy", action="append", choices=("random", "best-fit", "fragmentation"),
                   help="policy to run; repeat for several (default: all three)")
    p.add_argument("--seeds", type=integer(minimum=1), default=10, metavar="N",
                   help="runs per policy, seeds 0..N-1 (default: %(default)s)")
    p.add_argument("--jobs", type=integer(minimum=1), default=2, metavar="N",
                   help="local processes to run them on (default: %(default)s; ignored "
                   "with --ray-address)")
    add_ray_address(p)
    p.add_argument("--out", metavar="DIR", help="write packing.csv, packing.md and packing.png")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=run)


def _trace_name(path: Path) -> str:
    """The name the paper's figures are kept under, for its two pod lists."""
    for name in ("multigpu20", "default"):
        if name in path.stem:
            return name
    return path.stem


def run(args: argparse.Namespace) -> int:
    from scheduler.placement.gpu_shares import Policy
    from simulator import packing, packing_report
    from simulator.executors import ExecutorError, RunFailed
    from simulator.progress import progress_bar
    from simulator.samples import sample_path
    from simulator.trace import TraceError

    out = Path(args.out) if args.out else None
    if out is not None and (problem := output_dir_problem(out)):
        print(f"gang-scheduler packing: --out {out}: {problem}", file=sys.stderr)
        return 2
    try:
        runner = executor(args, args.jobs)
    except ExecutorError as exc:
        print(f"gang-scheduler packing: {exc}", file=sys.stderr)
        return 2

    def find(name: str) -> Path:
        """A file by its path, else a shipped sample by name."""
        return Path(name) if Path(name).is_file() else sample_path(name)

    try:
        pods_path, nodes_path = find(args.pods), find(args.nodes)
        requests = packing.load_requests(pods_path)
        nodes = packing.load_nodes(nodes_path)
    except (TraceError, OSError) as exc:
        print(f"gang-scheduler packing: {exc}", file=sys.stderr)
        return 2
    if not any(s.gpus for s in nodes.values()):
        print(f"gang-scheduler packing: --nodes {nodes_path}: no node has a GPU",
              file=sys.stderr)
        return 2
    policies = [Policy(p) for p in (args.policy or [p.value for p in Policy])]
    seeds = range(args.seeds)
    total = len(policies) * len(seeds)
    try:
        with progress_bar(f"packing {pods_path.name}", total,
                          enabled=not args.no_progress) as advance:
            exp = packing_report.experiment(_trace_name(pods_path), nodes, requests, policies,
                                            seeds, done=lambda _: advance(1), executor=runner)
    except RunFailed as failed:
        policy, seed = packing_report.runs(policies, seeds)[failed.index]
        print(f"gang-scheduler packing: the {policy} run with seed {seed} failed{failed.where}: "
              f"{failed.reason}", file=sys.stderr)
        return 1
    except ExecutorError as exc:
        print(f"gang-scheduler packing: {exc}", file=sys.stderr)
        return 1
    text = packing_report.table(exp)
    print(text)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        packing_report.write_csv(exp, out / "packing.csv")
        (out / "packing.md").write_text(text + "\n", encoding="utf-8")
        packing_report.plot(exp, out / "packing.png")
        print(f"wrote {out / 'packing.csv'}, {out / 'packing.md'}, {out / 'packing.png'}")
    return 0
