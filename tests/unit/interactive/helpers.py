"""Builders for interactive gangs and capped queues (on top of the policies' builders)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from policies.interactive import InteractivePolicy
from policies.queues import Queue
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan
from scheduler.model import Gang, RunningGang, Tier
from scheduler.model.labels import Labels
from scheduler.model.workloads import USER_LABEL
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue

NOW = 10_000.0


def notebook(name: str, q: str = "q", *, user: str | None = "alice", gpus: int = 1,
             label: str = USER_LABEL, **kw: object) -> Gang:
    """An interactive single-pod gang of *user* (None: no user label)."""
    g = gang(name, q, gpus=gpus, **kw)  # type: ignore[arg-type]
    roles = g.roles if user is None else tuple(
        replace(r, labels=Labels({label: user})) for r in g.roles)
    return replace(g, tier=Tier.INTERACTIVE, roles=roles)


def capped(name: str = "q", parent: str | None = None, *, gpus: int | None = None,
           gangs: int | None = None, quota: int = 64, **kw: object) -> Queue:
    return replace(queue(name, parent, quota={"a": quota}, **kw),  # type: ignore[arg-type]
                   interactive=InteractivePolicy(gpus, gangs))


def plan_of(queues: Sequence[Queue], pending: Sequence[Gang],
            run: Sequence[RunningGang] = (), *, node_count: int = 1,
            preset: str = "gang-scheduler", now: float = NOW, **overrides: object
            ) -> CyclePlan:
    return decide(Snapshot(nodes("a", node_count), run), pending,
                  policies(*queues, preset=preset, **overrides), now, solver=SOLVE)
