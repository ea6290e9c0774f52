"""Benchmark: do the estimated starts come true, and how often does a pending gang's answer change?

Run from the repository root:

    .venv/bin/python benchmarks/bench_eta.py                       # 3 seeds, 14 jobs/h
    .venv/bin/python benchmarks/bench_eta.py --seeds 6 --rate 20 --min-runtime 0,1800

The simulator runs the scheduler's own ``decide`` (``Scheduler.run_once``) over the synthetic
two-pool workload (``synthetic-two-pools-sample`` redrawn with seeds 1..N) on
``clusters/sim-two-pools.yaml`` with its queues, whose idle quota is borrowed and reclaimed;
``--min-runtime`` sets every queue's ``minRuntimeSeconds`` (how long a borrower is protected
before its quota can be reclaimed). For every gang that gets a reservation, the first
estimated start (``PendingReason.estimated_start``, what goes to ``status.estimatedStart``)
is compared with when it actually started (its first start: only estimates made before it
was first bound count, not those of a pending spell after a preemption); the error (actual -
estimated; positive: later than promised) is printed as a distribution, for two estimators
run on the same workload:

- ``reclaim-aware``: this scheduler's (running gangs' expected ends, and gangs the reserved
  gang may preempt counted as released when their minimum runtime is over);
- ``expected-ends``: running gangs' expected ends (and gangs being evicted) only, without
  the gangs the reserved gang may preempt: the estimator before issue 16 counted neither.

Each reserved gang that started more than 10 minutes early is then put down to its cause
(``eta_causes.py``: its own preemption, a gang it waited for preempted for another, one that
ended before its estimate, new capacity, or fewer releases than estimated).

Then how often the answers written for pending gangs change, per pending gang-hour: the
condition text (``str(PendingReason)``: each change a write of every pod's condition and the
PodGroup status), the event note (each change a new event per object; the same text since
the queue position left it for ``status.queuePosition``), the queue position (a PodGroup
status write), and the estimate beyond the writer's slack (``kube.status.same_estimate``: a
PodGroup status write and one per pod and Job for their annotations).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eta_causes import Causes, merge  # noqa: E402

from policies.queues import QueueSet  # noqa: E402
from scheduler.decide import consider  # noqa: E402
from scheduler.decide.plan import CyclePlan, ReasonCategory  # noqa: E402
from scheduler.feed.cache import ClusterCache  # noqa: E402
from scheduler.feed.cache_cycle import CycleInput  # noqa: E402
from scheduler.kube.write.status import same_estimate  # noqa: E402
from scheduler.run.loop import ApplyResult  # noqa: E402
from simulator import session  # noqa: E402
from simulator.engine import Simulation, SimulationOptions  # noqa: E402
from simulator.loaders.synthetic import generate, load_spec  # noqa: E402
from simulator.policies import make_preset  # noqa: E402
from simulator.samples import sample_path  # noqa: E402

CLUSTER = ROOT / "scheduler" / "examples" / "clusters" / "sim-two-pools.yaml"
QUEUES = ROOT / "simulator" / "samples" / "two_pools_queues.yaml"
TRACE = "synthetic-two-pools-sample"
ESTIMATORS = ("reclaim-aware", "expected-ends")


@dataclass(frozen=True)
class Case:
    estimator: str
    min_runtime: float
    rate: float
    seed: int


@dataclass
class Watch:
    """What the plans said about each pending gang, cycle after cycle."""

    first: dict[str, tuple[float, float]] = field(default_factory=dict)  # id -> (at, estimate)
    text: dict[str, str] = field(default_factory=dict)
    estimate: dict[str, float | None] = field(default_factory=dict)
    since: dict[str, float] = field(default_factory=dict)  # first pending
    last: dict[str, float] = field(default_factory=dict)  # last pending
    note: dict[str, str] = field(default_factory=dict)
    bound: set[str] = field(default_factory=set)  # bound once: later spells are not counted
    text_changes: int = 0
    note_changes: int = 0
    position_moves: int = 0
    position: dict[str, int] = field(default_factory=dict)
    estimate_moves: int = 0

    def see(self, plan: CyclePlan) -> None:
        for gid, reason in plan.pending.items():
            self.since.setdefault(gid, plan.now)
            self.last[gid] = plan.now
            text, est = str(reason), reason.estimated_start
            note = f"{reason.category}: {reason.message}"  # an event's note
            if gid in self.text and self.text[gid] != text:
                self.text_changes += 1
            if gid in self.note and self.note[gid] != note:
                self.note_changes += 1
            self.text[gid], self.note[gid] = text, note
            if gid in self.position and self.position[gid] != reason.position:
                self.position_moves += 1
            self.position[gid] = reason.position
            old = self.estimate.get(gid)
            if est is not None and (old is None or not same_estimate(old, est, plan.now)):
                self.estimate_moves += old is not None
                self.estimate[gid] = est
            if (reason.category is ReasonCategory.RESERVED and est is not None
                    and gid not in self.bound):
                self.first.setdefault(gid, (plan.now, est))
        self.bound.update(b.gang_id for b in plan.binds)


class _Watching:
    """The simulated cluster as actuator, watching each plan (and the input it was made
    from) before carrying it out."""

    def __init__(self, inner: Any, watch: Watch, causes: Causes, cache: ClusterCache) -> None:
        self.inner, self.watch, self.causes = inner, watch, causes
        self.input: CycleInput | None = None
        read = cache.cycle_input

        def remembered(now: float) -> CycleInput:
            self.input = read(now)
            return self.input

        cache.cycle_input = remembered  # type: ignore[method-assign]

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        self.watch.see(plan)
        if self.input is not None:
            self.causes.see(self.input, plan)
        result: ApplyResult = self.inner.apply(plan, now)
        return result


def _no_reclaim(*_: object, **__: object) -> dict[str, float]:
    return {}


def run_case(case: Case) -> tuple[Case, list[float], tuple[int, int, int, int, float], Causes]:
    """(errors in seconds, (condition text changes, event note changes, position moves,
    estimate moves, pending gang-hours), the causes of early starts)."""
    session.quiet_scheduler_logs()
    if case.estimator == "expected-ends":
        consider.protected_until = _no_reclaim  # type: ignore[assignment]
    spec = replace(load_spec(sample_path(TRACE)), seed=case.seed,
                   rate_per_second=case.rate / 3600)
    inputs = session.load_inputs(session.SessionSpec(cluster=str(CLUSTER), trace=TRACE,
                                                     queues=str(QUEUES)))
    queues = QueueSet.of(tuple(
        replace(q, preemption=replace(q.preemption, min_runtime_seconds=case.min_runtime))
        for q in inputs.queues.queues.values()))
    sim = Simulation(inputs.nodes, generate(spec), make_preset("gang-scheduler", queues,
                                                                inputs.scheduler),
                     SimulationOptions())
    watch, causes = Watch(), Causes(queues)
    sim.scheduler.actuator = _Watching(sim.cluster, watch, causes,  # type: ignore[assignment]
                                       sim.cache)
    result = sim.run()
    started = {o.job_id: o.start_time for o in result.outcomes if o.start_time is not None}
    errors = [started[gid.split("/", 1)[1]] - est for gid, (_, est) in watch.first.items()
              if gid.split("/", 1)[1] in started]
    hours = sum(watch.last[g] - watch.since[g] for g in watch.since) / 3600
    churn = (watch.text_changes, watch.note_changes, watch.position_moves,
             watch.estimate_moves, hours)
    return case, errors, churn, causes


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


ROW: tuple[tuple[str, Callable[[list[float]], float]], ...] = (
    ("median |err| min", lambda e: statistics.median(abs(x) for x in e) / 60),
    ("p90 |err| min", lambda e: _pct([abs(x) for x in e], 0.9) / 60),
    ("mean err min", lambda e: statistics.fmean(e) / 60),
    ("within 10 min %", lambda e: 100 * sum(abs(x) <= 600 for x in e) / len(e)),
    ("started >10 min early %", lambda e: 100 * sum(x < -600 for x in e) / len(e)),
    ("started >10 min late %", lambda e: 100 * sum(x > 600 for x in e) / len(e)),
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=float, default=14.0, help="jobs/hour (default 14)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 1..N (default 3)")
    p.add_argument("--min-runtime", default="0,1800", metavar="S,S",
                   help="queues' minRuntimeSeconds to run with (default 0,1800)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    args = p.parse_args(argv)
    runtimes = [float(x) for x in args.min_runtime.split(",")]
    cases = [Case(e, m, args.rate, s) for m in runtimes for e in ESTIMATORS
             for s in range(1, args.seeds + 1)]
    errors: dict[tuple[float, str], list[float]] = {}
    churn: dict[tuple[float, str], list[tuple[int, int, int, int, float]]] = {}
    causes: dict[tuple[float, str], list[Causes]] = {}
    with ProcessPoolExecutor(max_workers=args.jobs, max_tasks_per_child=1) as pool:
        for done, (case, errs, rate, why) in enumerate(pool.map(run_case, cases), 1):
            causes.setdefault((case.min_runtime, case.estimator), []).append(why)
            errors.setdefault((case.min_runtime, case.estimator), []).extend(errs)
            churn.setdefault((case.min_runtime, case.estimator), []).append(rate)
            print(f"\r{done}/{len(cases)} runs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"ETA error of each reserved gang's first estimate (actual - estimated start), "
          f"{args.seeds} seed(s) at {args.rate:g} jobs/h")
    print(f"| minRuntime s | estimator | gangs | {' | '.join(n for n, _ in ROW)} |")
    print("|---:|---|---:|" + "---:|" * len(ROW))
    for (m, name), errs in errors.items():
        cells = " | ".join(f"{f(errs):,.1f}" for _, f in ROW) if errs else "-"
        print(f"| {m:g} | {name} | {len(errs)} | {cells} |")
    print("\nChanges of what is written for pending gangs, per pending gang-hour")
    print("(condition text: on the pods and the PodGroup; event note: an event per object;"
          " position: status.queuePosition; estimate: moved beyond the writer's slack)")
    print("| minRuntime s | estimator | condition text changes | event note changes | "
          "position moves | estimate moves | gang-hours |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for (m, name), runs in churn.items():
        text, note, position, moves = (sum(r[i] for r in runs) for i in range(4))
        hours = sum(r[4] for r in runs) or 1.0
        print(f"| {m:g} | {name} | {text / hours:.2f} | {note / hours:.2f} | "
              f"{position / hours:.2f} | {moves / hours:.2f} | {hours:,.0f} |")
    for (m, name), found in causes.items():
        print(f"\nminRuntime {m:g}, {name}: {merge(found).report()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
