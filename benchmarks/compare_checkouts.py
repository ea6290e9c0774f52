"""Two checkouts of gang-scheduler side by side: same decisions, and how fast, in one run.

    .venv/bin/python benchmarks/compare_checkouts.py BASE NEW [--rounds N] [--philly FILE]

BASE and NEW are checkouts with their own ``.venv`` (``pip install -e '.[dev]'`` in each).
The figures come from each checkout's own commands, the two checkouts' runs of one command
started together so that load on a shared machine falls on both alike:

- ``bench_cycle.py``: decide p50 wall and CPU over ``--rounds`` rounds, and the plan counts;
- ``bench_sim.py`` on the full Philly trace (``--philly``, on ``sim-philly.yaml``, the
  ``gang-scheduler`` policy): wall and CPU seconds, cycles, and whether the per-job outcomes
  are identical;
- ``gang-scheduler simulate`` with its defaults: wall seconds, and whether the figures
  (``summary.json`` without the command line) and per-job outcomes are identical.

A refactoring of the decision core should print "identical" everywhere and figures no
worse; CPU seconds are the steadier speed figure on a loaded machine.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

DEFAULT_PHILLY = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "philly" / \
    "philly.csv"


def run_both(jobs: list[tuple[Path, tuple[str, ...]]]) -> list[tuple[str, float]]:
    """Each (checkout, arguments) with the checkout's own python, all started at once: their
    output and wall seconds."""
    results: list[tuple[str, float] | None] = [None] * len(jobs)

    def one(i: int, checkout: Path, args: tuple[str, ...]) -> None:
        started = time.perf_counter()
        done = subprocess.run([str(checkout / ".venv" / "bin" / "python"), *args],
                              cwd=checkout, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"{checkout}: {' '.join(args)} failed:\n{done.stderr[-2000:]}",
                  file=sys.stderr)
            return
        results[i] = (done.stdout, time.perf_counter() - started)

    threads = [threading.Thread(target=one, args=(i, c, a)) for i, (c, a) in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if any(r is None for r in results):
        raise SystemExit("a run failed (see above)")
    return [r for r in results if r is not None]


def cycle_figures(checkout: Path, out: str) -> tuple[float, float, str]:
    wall = re.search(r"decide wall: p50 ([\d.]+) s", out)
    cpu = re.search(r"decide cpu : p50 ([\d.]+) s", out)
    plan = re.search(r"^plan: (.*)$", out, re.M)
    if not (wall and cpu and plan):
        raise SystemExit(f"{checkout}: unexpected bench_cycle output:\n{out}")
    return float(wall.group(1)), float(cpu.group(1)), plan.group(1)


def sim_args(philly: Path, out_dir: Path) -> tuple[str, ...]:
    return ("benchmarks/bench_sim.py", "--trace", str(philly), "--cluster",
            "scheduler/examples/clusters/sim-philly.yaml", "--policy", "gang-scheduler",
            "--outcomes", str(out_dir))


def sim_figures(checkout: Path, out: str) -> tuple[float, float, int]:
    row = re.search(r"^gang-scheduler\s+[\d,]+\s+[\d,]+\s+[\d,]+\s+([\d,]+)\s+([\d.]+)\s+"
                    r"([\d.]+)", out, re.M)
    if row is None:
        raise SystemExit(f"{checkout}: unexpected bench_sim output:\n{out}")
    return float(row.group(2)), float(row.group(3)), int(row.group(1).replace(",", ""))


def figures(out_dir: Path) -> object:
    summary = json.loads((out_dir / "summary.json").read_text())
    summary["run"].pop("command", None)
    summary["run"].pop("cluster", None)  # a path inside the checkout
    return summary


def _pair(form: str, values: list[float] | list[int]) -> tuple[str, str]:
    return form.format(values[0]), form.format(values[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=3, help="bench_cycle rounds per checkout")
    parser.add_argument("--philly", type=Path, default=DEFAULT_PHILLY,
                        help="the full Philly trace (default: %(default)s)")
    parser.add_argument("--skip-sim", action="store_true", help="bench_cycle only")
    args = parser.parse_args()
    pair = (args.base.resolve(), args.new.resolve())
    for checkout in pair:
        if not (checkout / ".venv" / "bin" / "python").exists():
            raise SystemExit(f"{checkout}: no .venv (python3 -m venv .venv && .venv/bin/pip "
                             "install -e '.[dev]')")
    rows: list[tuple[str, str, str]] = []
    cycle: dict[Path, list[tuple[float, float, str]]] = {c: [] for c in pair}
    for _ in range(args.rounds):
        outs = run_both([(c, ("benchmarks/bench_cycle.py", "--runs", "3")) for c in pair])
        for c, (out, _) in zip(pair, outs, strict=True):
            cycle[c].append(cycle_figures(c, out))
    walls = [statistics.median(w for w, _, _ in cycle[c]) for c in pair]
    cpus = [statistics.median(u for _, u, _ in cycle[c]) for c in pair]
    plans = [{p for _, _, p in cycle[c]} for c in pair]
    rows += [("bench_cycle decide p50 wall s (median of rounds)", *_pair("{:.3f}", walls)),
             ("bench_cycle decide p50 CPU s (median of rounds)", *_pair("{:.3f}", cpus)),
             ("bench_cycle plan", " | ".join(sorted(plans[0])),
              "identical" if plans[0] == plans[1] else " | ".join(sorted(plans[1])))]
    if not args.skip_sim:
        with tempfile.TemporaryDirectory() as tmp:
            dirs = [Path(tmp) / name for name in ("base", "new")]
            outs = run_both([(c, sim_args(args.philly, d / "bench"))
                             for c, d in zip(pair, dirs, strict=True)])
            sims = [sim_figures(c, out) for c, (out, _) in zip(pair, outs, strict=True)]
            same = filecmp.cmp(dirs[0] / "bench" / "gang-scheduler.csv",
                               dirs[1] / "bench" / "gang-scheduler.csv", shallow=False)
            rows += [("bench_sim full Philly wall s", *_pair("{:.2f}", [s[0] for s in sims])),
                     ("bench_sim full Philly CPU s", *_pair("{:.2f}", [s[1] for s in sims])),
                     ("bench_sim full Philly cycles", *_pair("{:,}", [s[2] for s in sims])),
                     ("bench_sim per-job outcomes", "", "identical" if same else "DIFFERENT")]
            ran = run_both([(c, ("-m", "scheduler.cli.main", "simulate", "--out",
                                 str(d / "simulate"), "--no-progress"))
                            for c, d in zip(pair, dirs, strict=True)])
            sim_walls = [wall for _, wall in ran]
            same_figures = figures(dirs[0] / "simulate") == figures(dirs[1] / "simulate")
            same_jobs = filecmp.cmp(dirs[0] / "simulate" / "outcomes.csv",
                                    dirs[1] / "simulate" / "outcomes.csv", shallow=False)
            rows += [("simulate (defaults) wall s", *_pair("{:.1f}", sim_walls)),
                     ("simulate figures (summary.json)", "",
                      "identical" if same_figures else "DIFFERENT"),
                     ("simulate per-job outcomes", "", "identical" if same_jobs else "DIFFERENT")]
    width = max(len(r[0]) for r in rows)
    print(f"base: {pair[0]}\nnew:  {pair[1]}")
    print(f"{'':<{width}}  {'base':>10}  {'new':>10}")
    for label, a, b in rows:
        if len(a) > 10:  # a long value (the plan): on lines of its own
            print(f"{label}:\n  base: {a}\n  new:  {b}")
        else:
            print(f"{label:<{width}}  {a:>10}  {b:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
