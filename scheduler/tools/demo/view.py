"""Rendering the demo: a frame to rich renderables, and the closing summary.

Pure functions of a ``Frame`` (or the tracker at the end), so a test renders them into a
``Console(record=True)`` and reads the text. Colours carry no information the text lacks.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from scheduler.tools.demo.frame import (
    Frame,
    GangRow,
    NodeRow,
    QueueRow,
)
from scheduler.tools.demo.track import Tracker

TEAM_STYLES = {"team-a": "cyan", "team-b": "magenta"}
BOX = box.SIMPLE_HEAD  # no outer border: the whole view fits a 40-line terminal
STATE_STYLES = {"Running": "bold green", "Done": "dim", "Waiting": "yellow",
                "Requeued": "bold red", "Failed": "bold red", "Not yet": "dim"}


def team_style(team: str) -> str:
    return TEAM_STYLES.get(team, "yellow")


def render(frame: Frame) -> RenderableType:
    """The whole live view."""
    header = Text.assemble(
        ("gang-scheduler demo", "bold"), f"   t+{frame.elapsed:5.1f}s   speed {frame.speed:g}"
        f"   jobs done {frame.done}/{frame.total}   ",
        ("team-a", team_style("team-a")), " ", ("team-b", team_style("team-b")))
    parts: list[RenderableType] = [header, queues_table(frame.queues),
                                   gangs_table(frame.gangs), nodes_panel(frame.nodes)]
    if frame.log:
        parts.append(Panel(Text("\n".join(frame.log[-6:])), title="events", title_align="left"))
    return Group(*parts)


def queues_table(rows: Iterable[QueueRow]) -> Table:
    rows = list(rows)
    pools = sorted({p.pool for r in rows for p in r.pools})
    table = Table(title="Queues (GPUs allocated / nominal)", title_justify="left", box=BOX,
                  show_edge=False)
    table.add_column("queue")
    table.add_column("weight", justify="right")
    for pool in pools:
        table.add_column(pool, justify="right")
    for col in ("pending", "running", "fair share", "usage share"):
        table.add_column(col, justify="right")
    for r in rows:
        cells = []
        for pool in pools:
            use = next((p for p in r.pools if p.pool == pool), None)
            if use is None:
                cells.append(Text("-", style="dim"))
                continue
            borrowed = use.allocated > use.nominal
            cells.append(Text(f"{use.allocated}/{use.nominal}" + (" ↑" if borrowed else ""),
                              style="bold" if borrowed else ""))
        name = Text(("  " if r.parent else "") + r.name, style=team_style(r.name)
                    if r.parent else "bold")
        table.add_row(name, f"{r.weight:g}", *cells, str(r.pending), str(r.running),
                      f"{r.fair_share:.2f}", f"{r.usage_share:.2f}")
    return table


def gangs_table(rows: Iterable[GangRow]) -> Table:
    table = Table(title="Gangs", title_justify="left", box=BOX, show_edge=False)
    for col, justify in (("gang", "left"), ("team", "left"), ("pool", "left"),
                         ("GPUs", "right"), ("priority", "left"), ("state", "left"),
                         ("bound", "right"), ("waited", "right"), ("why waiting", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        state = r.state + (f" ({r.preemptions}× preempted)" if r.preemptions else "")
        table.add_row(r.name, Text(r.team, style=team_style(r.team)), r.pool, r.shape,
                      r.priority, Text(state, style=STATE_STYLES.get(r.state, "")),
                      f"{r.bound}/{r.workers}", "" if r.waited is None else f"{r.waited:.0f}s",
                      Text(r.reason, overflow="fold"))
    return table


def gpu_bar(row: NodeRow) -> Text:
    """One cell per GPU: a block in the team's colour when in use, a dot when free."""
    bar = Text()
    for team, gpus in row.used:
        bar.append("█" * gpus, style=team_style(team))
    bar.append("·" * max(0, row.capacity - row.used_gpus), style="dim")
    return bar


def nodes_panel(rows: Iterable[NodeRow]) -> Table:
    table = Table(title="Nodes (one cell per GPU)", title_justify="left", box=BOX, show_edge=False)
    table.add_column("pool / rack")
    table.add_column("nodes")
    groups: dict[tuple[str, str], list[NodeRow]] = {}
    for r in rows:
        groups.setdefault((r.pool, r.rack), []).append(r)
    for (pool, rack), nodes in groups.items():
        line = Text()
        for i, n in enumerate(nodes):
            if i:
                line.append("   ")
            line.append(f"{n.name} ")
            line.append_text(gpu_bar(n))
            line.append(f" {n.used_gpus}/{n.capacity}")
        used, cap = sum(n.used_gpus for n in nodes), sum(n.capacity for n in nodes)
        table.add_row(f"{pool} {rack.removeprefix(pool + '-')} ({used}/{cap})", line)
    return table


# The summary ----------------------------------------------------------------------------------
def summary_facts(tracker: Tracker) -> list[str]:
    """What the run showed, in sentences derived from what was observed (nothing assumed)."""
    jobs = list(tracker.jobs.values())
    done = [p for p in jobs if p.finished_at is not None and not p.failed]
    facts = [f"{len(done)} of {len(jobs)} gangs ran to completion"
             + (f"; {len(jobs) - len(done)} did not" if len(done) < len(jobs) else "") + "."]
    longest = max((p.longest_partial for p in jobs), default=0.0)
    facts.append(f"No gang was left partly bound: the longest any gang was seen with some "
                 f"but not all members bound was {longest:.1f}s (the view polls 4 times a "
                 "second; a gang's members are bound in parallel).")
    for p in jobs:
        for q in jobs:
            if (p is q or p.spec.pool != q.spec.pool or None in (
                    p.submitted_at, q.submitted_at, p.first_started_at, q.first_started_at)):
                continue
            assert p.submitted_at is not None and q.submitted_at is not None
            assert p.first_started_at is not None and q.first_started_at is not None
            if q.submitted_at < p.submitted_at and p.first_started_at < q.first_started_at \
                    and p.finished_at is not None and p.finished_at <= q.first_started_at + 1:
                facts.append(f"{p.spec.name} started after {q.spec.name} was submitted but "
                             f"before it started, and ended before {q.spec.name} needed the "
                             "GPUs: backfill.")
    for p in jobs:
        if p.preemptions:
            facts.append(f"{p.spec.name} was preempted {len(p.preemptions)}× as a whole gang "
                         f"and resumed with the work it had left"
                         + (" and finished." if p.finished_at is not None else "."))
    return facts


def summary(tracker: Tracker, elapsed: float) -> RenderableType:
    table = Table(title=f"Summary after {elapsed:.0f}s", title_justify="left")
    for col in ("gang", "team", "GPUs", "pool", "waited", "preempted", "outcome"):
        table.add_column(col)
    for p in tracker.jobs.values():
        s = p.spec
        waited = (f"{p.first_started_at - p.submitted_at:.0f}s"
                  if p.first_started_at is not None and p.submitted_at is not None else "-")
        table.add_row(s.name, Text(s.team, style=team_style(s.team)), s.shape, s.pool, waited,
                      f"{len(p.preemptions)}×" if p.preemptions else "",
                      Text(p.state, style=STATE_STYLES.get(p.state, "")))
    facts = Text("\n".join(f"• {f}" for f in summary_facts(tracker)))
    return Group(table, facts)


def summary_line(f: Frame) -> str:
    """One plain line for ``--no-live``: GPUs in use per pool, running and waiting gangs."""
    pools: dict[str, list[int]] = {}
    for n in f.nodes:
        used_cap = pools.setdefault(n.pool, [0, 0])
        used_cap[0] += n.used_gpus
        used_cap[1] += n.capacity
    use = ", ".join(f"{p} {u}/{c} GPUs" for p, (u, c) in sorted(pools.items()))
    running = [g.name for g in f.gangs if g.state == "Running"]
    waiting = [g.name for g in f.gangs if g.state in ("Waiting", "Requeued")]
    return (f"{use}; running: {', '.join(running) or '-'}; waiting: {', '.join(waiting) or '-'}"
            f"; done {f.done}/{f.total}")
