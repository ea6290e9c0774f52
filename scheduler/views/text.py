"""The views as terminal tables (rich): ``queues``, ``gangs`` and ``top``, which is both.

Units in every header; times in the same short form everywhere (``format_duration``).
Colours only repeat what the text says.
"""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from scheduler.model.durations import format_duration
from scheduler.views.failures import detail_lines
from scheduler.views.state import (
    ClusterView,
    GangRow,
    NodeRow,
    QueueRow,
    budget_text,
    budgets,
    gang_labels,
    interactive,
    interactive_counts,
    interactive_text,
    remembered,
    remembers,
    use_text,
)

BOX = box.SIMPLE_HEAD


def queues_table(view: ClusterView) -> Table:
    pools = sorted({p.pool for q in view.queues for p in q.pools})
    table = Table(title="Queues (GPUs: in use / nominal, borrowed +, lent -)",
                  title_justify="left", box=BOX)
    table.add_column("queue")
    table.add_column("weight", justify="right")
    for pool in pools:
        table.add_column(pool, justify="right")
    for col in ("fair share", "usage", "running", "pending"):
        table.add_column(col, justify="right")
    memory = remembers(view)
    if memory:  # fair share with memory on: what each queue is remembered for
        table.add_column("remembered GPU-h", justify="right")
    measured = any(q.idle_gpus is not None for q in view.queues)
    if measured:  # GPU metrics read: allocated GPUs that do nothing
        table.add_column("idle GPUs", justify="right")
    budgeted = budgets(view)
    if budgeted:  # a queue has a GPU-hour budget (spec.guards.budget)
        table.add_column("budget GPU-h", justify="right")
    tiers = interactive_counts(view)
    if tiers is not None:  # interactive gangs shown: how many of each queue's are
        table.add_column("interactive run/pend", justify="right")
    for q in view.queues:
        cells = []
        for pool in pools:
            p = next((x for x in q.pools if x.pool == pool), None)
            if p is None:
                cells.append(Text("-", style="dim"))
                continue
            extra = (f" +{p.borrowed}" if p.borrowed else "") + (f" -{p.lent}" if p.lent else "")
            cells.append(Text(f"{p.allocated_text()}/{p.nominal}{extra}",
                              style="bold" if p.borrowed else ""))
        name = Text("  " * q.depth + q.name)
        if q.state:
            name.append(f" [{q.state}]", style="bold yellow")
        table.add_row(name, f"{q.weight:g}", *cells,
                      f"{q.fair_share:.2f}", f"{q.usage_share:.2f}", str(q.running),
                      str(q.pending), *([remembered(q)] if memory else []),
                      *([_idle(q.idle_gpus)] if measured else []),
                      *([_budget(q)] if budgeted else []),
                      *([interactive_text(tiers, q.name)] if tiers is not None else []))
    flagged = [f"{q.name} [{q.state}]: {q.why}" for q in view.queues if q.state]
    if flagged:  # under the table: the why of each queue marked in it
        table.caption = "\n".join(flagged)
        table.caption_justify = "left"
    return table


def pending_table(rows: tuple[GangRow, ...], labels: dict[str, str]) -> RenderableType:
    """The pending gangs in order, then why each waits (its own lines: a reason is long, and
    a table on an 80-column terminal would crush it or cut the gang names); *labels*: each
    gang's name (``gang_labels``)."""
    table = Table(title="Pending gangs (in the order they are considered)", title_justify="left",
                  box=BOX)
    for col, justify in (("#", "right"), ("in queue", "right"), ("gang", "left"),
                         ("queue", "left"), ("GPUs", "right"), ("reason", "left"),
                         ("ETA", "right")):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    tiers = _tier_column(table, rows)
    failing = _failure_column(table, rows)
    why = Text()
    for g in rows:
        table.add_row(_pos(g.cluster_position), _pos(g.queue_position), labels[g.id], g.queue,
                      str(g.gpus), g.reason, format_duration(g.eta_seconds),
                      *_tier(g, tiers), *_last_failure(g, failing))
        why.append(f"{labels[g.id]}: ", style="bold")
        why.append(f"{g.message}\n")
    return Group(table, why) if rows else table


def running_table(rows: tuple[GangRow, ...], labels: dict[str, str]) -> RenderableType:
    """The running gangs; with GPU metrics, how busy each is (a "GPU use" column, each
    flagged rank marked in the ranks cell) and, under the table, what is wrong with each
    flagged gang in a sentence."""
    table = Table(title="Running gangs", title_justify="left", box=BOX)
    for col, justify in (("gang", "left"), ("queue", "left"), ("GPUs", "right"),
                         ("age", "right")):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    measured = any(g.use is not None for g in rows)
    tiers = _tier_column(table, rows)
    if measured:
        table.add_column("GPU use", justify="right", no_wrap=True)
    table.add_column("ranks (rank:node)")
    failing = _failure_column(table, rows)
    flagged = Text()
    for g in rows:
        marks = {r.rank: r.flag for r in g.use.ranks} if g.use else {}
        ranks = " ".join(f"{r.rank}:{r.node or '-'}"
                         + ("" if r.phase == "Running" else f"({r.phase})")
                         + (f"[{marks[r.rank]}]" if marks.get(r.rank) else "")
                         for r in g.ranks)
        table.add_row(labels[g.id], g.queue, str(g.gpus), format_duration(g.age_seconds),
                      *_tier(g, tiers), *([use_cell(g)] if measured else []),
                      Text(ranks or ", ".join(g.nodes), overflow="fold"),
                      *_last_failure(g, failing))
        if g.use is not None and g.use.summary:
            flagged.append(f"{labels[g.id]}: ", style="bold")
            flagged.append(f"{g.use.summary}\n", style="yellow")
    return Group(table, flagged) if flagged else table


def use_cell(g: GangRow) -> Text:
    """A running gang's GPU use (``use_text``), yellow when flagged."""
    text = use_text(g)
    return Text(text, style="dim" if text == "-" else
                "yellow" if g.use is not None and g.use.flagged else "")


def _budget(q: QueueRow) -> Text:
    """Used of the budget; bold red once used up (the queue starts nothing new)."""
    b = q.budget
    return Text(budget_text(q), style="dim" if b is None else "bold red" if b.spent else "")


def _idle(gpus: int | None) -> Text:
    return Text("-", style="dim") if gpus is None else Text(str(gpus),
                                                            style="yellow" if gpus else "")


def _tier_column(table: Table, rows: tuple[GangRow, ...]) -> bool:
    """A "tier" column, only when one of *rows* is interactive (most clusters have none)."""
    shown = any(interactive(g) for g in rows)
    if shown:
        table.add_column("tier", no_wrap=True)
    return shown


def _tier(g: GangRow, shown: bool) -> tuple[Text, ...]:
    if not shown:
        return ()
    return (Text(g.tier, style="bold magenta" if interactive(g) else "dim"),)


def _failure_column(table: Table, rows: tuple[GangRow, ...]) -> bool:
    """A "last failure" column, only when a gang of *rows* has failures (80 columns)."""
    failing = any(g.failures is not None for g in rows)
    if failing:
        table.add_column("last failure")
    return failing


def _last_failure(g: GangRow, failing: bool) -> tuple[Text, ...]:
    if not failing:
        return ()
    return (Text(g.failures.summary if g.failures else "-", overflow="fold",
                 style="" if g.failures is None or all(r.disrupted for r in g.failures.ranks)
                 else "red"),)


def failed_table(rows: tuple[GangRow, ...], labels: dict[str, str]) -> Table:
    """Gangs with no pending or running pods whose last pods failed (a Job backing off)."""
    table = Table(title="Failed gangs (no pods pending or running)",
                  title_justify="left", box=BOX)
    for col in ("gang", "queue"):
        table.add_column(col, no_wrap=True)
    failing = _failure_column(table, rows)
    for g in rows:
        table.add_row(labels[g.id], g.queue or "-", *_last_failure(g, failing))
    return table


def failures_detail(view: ClusterView, labels: dict[str, str]) -> Text:
    """Each failing gang's last failures in full, as ``explain`` prints them."""
    out = Text()
    for g in (*view.pending, *view.running, *view.failed):
        if g.failures is None:
            continue
        out.append(f"{labels[g.id]}: ", style="bold")
        out.append("\n".join(detail_lines(g.failures)) + "\n")
    return out


def gangs(view: ClusterView) -> RenderableType:
    """``gang-scheduler gangs``: pending, running and failed gangs, then each failing gang's
    last failures in full."""
    labels = gang_labels(view)
    parts = [pending_table(view.pending, labels), running_table(view.running, labels)]
    if view.failed:
        parts.append(failed_table(view.failed, labels))
    detail = failures_detail(view, labels)
    if detail:
        parts.append(detail)
    return Group(*parts)


def queue_letters(nodes: tuple[NodeRow, ...]) -> dict[str, str]:
    """One letter per queue allocated GPUs (a, b, c, ... by name), for the node bars."""
    queues = sorted({q for n in nodes for q, _ in n.used})
    letters = "abcdefghijklmnpqtuvwxyz"  # no o, r, s: those mark other, reserved, stranded
    return {q: letters[i % len(letters)] for i, q in enumerate(queues)}


def node_bar(n: NodeRow, letters: dict[str, str]) -> Text:
    """One cell per GPU: its queue's letter where allocated (upper case: borrowed quota), ``o``
    other pods, ``r`` reserved, ``s`` stranded, ``.`` free."""
    bar = Text()
    borrowed = n.borrowed
    for queue, gpus in n.used:
        for _ in range(gpus):
            mark = letters.get(queue, "?")
            if borrowed > 0:
                mark, borrowed = mark.upper(), borrowed - 1
            bar.append(mark, style="bold cyan")
    bar.append("o" * n.other, style="dim")
    free = "r" if n.reserved else "s" if n.stranded else "."
    bar.append(free * n.free, style="yellow" if free != "." else "dim")
    return bar


def nodes_table(nodes: tuple[NodeRow, ...]) -> RenderableType:
    letters = queue_letters(nodes)
    table = Table(title="Nodes (one cell per GPU)", title_justify="left", box=BOX)
    for col in ("pool", "node", "GPUs"):
        table.add_column(col, no_wrap=True)
    table.add_column("free", justify="right")
    for n in nodes:
        table.add_row(n.pool, n.name, node_bar(n, letters), f"{n.free}/{n.gpus}")
    legend = "  ".join(f"{letter}={q}" for q, letter in letters.items())
    return Group(table, Text(f"{legend}  (UPPER: borrowed quota)  o other pods  r reserved  "
                             "s stranded  . free", style="dim"))


def top(view: ClusterView) -> RenderableType:
    labels = gang_labels(view)
    parts: list[RenderableType] = [
        Text.assemble(("gang-scheduler top", "bold"), f"   source: {view.source}   "
                      f"{len(view.running)} running, {len(view.pending)} pending"
                      + (f", {len(view.failed)} failed" if view.failed else "")),
        queues_table(view), pending_table(view.pending, labels),
        running_table(view.running, labels)]
    if view.failed:
        parts.append(failed_table(view.failed, labels))
    if view.nodes is not None:
        parts.append(nodes_table(view.nodes))
    if view.events:
        events = Table(title="Recent preemptions and reservations", title_justify="left",
                       box=BOX)
        for col in ("kind", "gang", "what"):
            events.add_column(col)
        for e in view.events[:8]:
            events.add_row(e.kind, e.gang, Text(e.message, overflow="fold"))
        parts.append(events)
    return Group(*parts)


def _pos(value: int | None) -> str:
    return "-" if value is None else str(value)
