"""What ``test_decisions_unchanged`` compares: each cycle's plan as plain data, and its digest.

``project`` keeps every decision a plan holds (binds with their pod -> node maps, evictions,
nominations, reservations, the reason of every pending gang, the order, per-queue tallies)
in plain JSON types; ``digest`` hashes that. The scenarios' cycles and a few simulated runs
are replayed by ``replay_*``; ``python -m tests.unit.recorded.record`` writes their digests
to ``plans.json`` (see README.md in this directory for when that is right).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from policies.queues import PolicySet
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan
from scheduler.decide.tallies import QueueTally, queue_tallies
from scheduler.model import Gang
from scheduler.run.loop import ApplyResult
from scheduler.world.snapshot import Snapshot
from simulator import session
from simulator.engine import Simulation, SimulationOptions
from simulator.policies import make_preset
from tests.unit.policies.builders import SOLVE
from tests.unit.recorded.scenarios import scenario
from tests.unit.test_decide_properties import NOW, World

HERE = Path(__file__).resolve().parent
RECORD = HERE / "plans.json"
SCENARIOS = 300
CLUSTERS = HERE.parents[2] / "scheduler" / "examples" / "clusters"
#: (trace sample, cluster, load_trace options): simulated runs whose every cycle is recorded.
RUNS: tuple[tuple[str, str, dict[str, float]], ...] = (
    ("philly-sample", "sim-small.yaml", {"limit": 300}),
    ("philly-sample", "sim-small.yaml", {"limit": 500, "time_scale": 0.3}),
    ("synthetic-two-pools-sample", "sim-two-pools.yaml", {"limit": 200}),
)


def tallies(plan: CyclePlan, snapshot: Snapshot, gangs: Sequence[Gang],
             policies: PolicySet) -> tuple[QueueTally, ...]:
    """The per-queue tallies of *plan* (decided on *snapshot* for *gangs*)."""
    return queue_tallies(snapshot, gangs, policies, plan)


def project(plan: CyclePlan, queues: tuple[QueueTally, ...]) -> dict[str, object]:
    def placement(p: object) -> object:
        if p is None:
            return None
        return [[[a.role, a.node, a.count] for a in p.assignments],  # type: ignore[attr-defined]
                p.solved_by, p.domains_used]  # type: ignore[attr-defined]

    return {
        "now": plan.now,
        "binds": [[b.gang_id, b.queue, placement(b.placement),
                   [[p.namespace, p.name, p.uid, n] for p, n in b.pod_nodes]]
                  for b in plan.binds],
        "evictions": [[e.victim, e.preemptor, e.message] for e in plan.evictions],
        "nominations": [[n.gang_id, list(n.nodes), list(n.victims), n.since,
                         placement(n.placement), n.inherited] for n in plan.nominations],
        "reservations": [[r.gang_id, list(r.nodes), r.estimated_start, r.queue,
                          [[pool, sorted(res.items())] for pool, res in r.charges],
                          list(r.pools)] for r in plan.reservations],
        "pending": {g: str(r) for g, r in sorted(plan.pending.items())},
        "order": list(plan.order),
        "queues": [[q.name, [[pool, sorted(res.items())] for pool, res in q.usage], q.running,
                    q.admitted, q.pending, repr(q.borrowed_share)] for q in queues],
    }


def digest(data: object) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _after(snapshot: Snapshot, plan: CyclePlan, pending: Sequence[Gang],
           now: float, keep_victims: bool) -> Snapshot:
    """The cluster once the plan is carried out: binds run; victims gone (or terminating)."""
    by_id = {g.id: g for g in pending}
    for b in plan.binds:
        snapshot = snapshot.with_running(b.placement.as_running(by_id[b.gang_id], now))
    victims = sorted({e.victim for e in plan.evictions})
    if keep_victims:
        for v in victims:
            snapshot = snapshot.with_running(replace(snapshot.running[v], terminating=True))
        return snapshot
    return snapshot.without_gangs(victims)


def replay_scenario(seed: int, s: World) -> list[str]:
    """Three cycles: from scratch, then twice with the previous plan carried over."""
    out: list[str] = []
    snapshot, pending, previous = s.snapshot, s.pending, None
    for k, now in enumerate((NOW, NOW + 60.0, NOW + 1_200.0)):
        plan = decide(snapshot, pending, s.policies, now, previous, solver=SOLVE)
        out.append(digest(project(plan, tallies(plan, snapshot, pending, s.policies))))
        bound = {b.gang_id for b in plan.binds}
        snapshot = _after(snapshot, plan, pending, now, keep_victims=(seed + k) % 2 == 0)
        pending = tuple(g for g in pending if g.id not in bound)
        previous = plan
    return out


class _Recording:
    """The simulated cluster as actuator, digesting each plan before carrying it out."""

    def __init__(self, sim: Simulation) -> None:
        self.sim, self.inner, self.digests = sim, sim.cluster, []  # type: ignore[var-annotated]

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        inp = self.sim.cache.cycle_input(now)
        queues = tallies(plan, inp.snapshot, inp.gangs.pending, self.sim.preset.policies)
        self.digests.append(digest(project(plan, queues)))
        return self.inner.apply(plan, now)


def replay_run(trace: str, cluster: str, options: dict[str, float], policy: str) -> list[str]:
    """Every cycle of a simulated run, and the jobs' outcomes last."""
    session.quiet_scheduler_logs()
    inputs = session.load_inputs(session.SessionSpec(
        cluster=str(CLUSTERS / cluster), trace=trace, trace_options=options))
    sim = Simulation(inputs.nodes, inputs.jobs, make_preset(policy, inputs.queues),
                     SimulationOptions())
    recording = _Recording(sim)
    sim.scheduler.actuator = recording  # type: ignore[assignment]
    result = sim.run()
    outcomes = [[o.job_id, o.start_time, o.end_time, o.preemptions, o.gpu_seconds_lost]
                for o in result.outcomes]
    return [*recording.digests, digest(outcomes)]


POLICIES = ("per-pod", "fifo-gang", "gang-scheduler")


def names() -> list[str]:
    """Every recorded replay, by name."""
    return ([f"scenario-{seed}" for seed in range(SCENARIOS)]
            + [f"run-{i}-{policy}" for i in range(len(RUNS)) for policy in POLICIES])


def replay(name: str) -> list[str]:
    kind, rest = name.split("-", 1)
    if kind == "scenario":
        return replay_scenario(int(rest), scenario(int(rest)))
    index, policy = rest.split("-", 1)
    trace, cluster, options = RUNS[int(index)]
    return replay_run(trace, cluster, options, policy)


def replay_all() -> Iterator[tuple[str, list[str]]]:
    for name in names():
        yield name, replay(name)


def main() -> int:
    recorded = dict(replay_all())
    RECORD.write_text(json.dumps(recorded, indent=0, sort_keys=True) + "\n")
    print(f"recorded {len(recorded)} replays, {sum(map(len, recorded.values()))} plans "
          f"into {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
