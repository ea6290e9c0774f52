"""Two checkouts of gang-scheduler side by side: same decisions, and how fast, in one run.

    .venv/bin/python benchmarks/compare_checkouts.py BASE NEW [--rounds N] [--philly FILE]

BASE and NEW are checkouts with their own ``.venv`` (``pip install -e '.[dev]'`` in each).
The figures come from each checkout's own commands, run in turn (BASE, NEW, BASE, NEW, ...)
so that load on a shared machine falls on both alike:

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
import time
from pathlib import Path

DEFAULT_PHILLY = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "philly" / \
    "philly.csv"


def run(checkout: Path, *args: str) -> tuple[str, float]:
    started = time.perf_counter()
    done = subprocess.run([str(checkout / ".venv" / "bin" / "python"), *args], cwd=checkout,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout, time.perf_counter() - started


def bench_cycle(checkout: Path) -> tuple[float, float, str]:
    out, _ = run(checkout, "benchmarks/bench_cycle.py", "--runs", "3")
    wall = re.search(r"decide wall: p50 ([\d.]+) s", out)
    cpu = re.search(r"decide cpu : p50 ([\d.]+) s", out)
    plan = re.search(r"^plan: (.*)$", out, re.M)
    if not (wall and cpu and plan):
        raise SystemExit(f"{checkout}: unexpected bench_cycle output:\n{out}")
    return float(wall.group(1)), float(cpu.group(1)), plan.group(1)


def bench_sim(checkout: Path, philly: Path, out_dir: Path) -> tuple[float, float, int]:
    out, _ = run(checkout, "benchmarks/bench_sim.py", "--trace", str(philly), "--cluster",
                 "scheduler/examples/clusters/sim-philly.yaml", "--policy", "gang-scheduler",
                 "--outcomes", str(out_dir))
    row = re.search(r"^gang-scheduler\s+[\d,]+\s+[\d,]+\s+[\d,]+\s+([\d,]+)\s+([\d.]+)\s+"
                    r"([\d.]+)", out, re.M)
    if row is None:
        raise SystemExit(f"{checkout}: unexpected bench_sim output:\n{out}")
    return float(row.group(2)), float(row.group(3)), int(row.group(1).replace(",", ""))


def simulate(checkout: Path, out_dir: Path) -> float:
    _, wall = run(checkout, "-m", "scheduler.cli.main", "simulate", "--out", str(out_dir),
                  "--no-progress")
    return wall


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
        for c in pair:
            cycle[c].append(bench_cycle(c))
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
            sims = [bench_sim(c, args.philly, d / "bench") for c, d in zip(pair, dirs,
                                                                           strict=True)]
            same = filecmp.cmp(dirs[0] / "bench" / "gang-scheduler.csv",
                               dirs[1] / "bench" / "gang-scheduler.csv", shallow=False)
            rows += [("bench_sim full Philly wall s", *_pair("{:.2f}", [s[0] for s in sims])),
                     ("bench_sim full Philly CPU s", *_pair("{:.2f}", [s[1] for s in sims])),
                     ("bench_sim full Philly cycles", *_pair("{:,}", [s[2] for s in sims])),
                     ("bench_sim per-job outcomes", "", "identical" if same else "DIFFERENT")]
            sim_walls = [simulate(c, d / "simulate") for c, d in zip(pair, dirs, strict=True)]
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
