"""The read-only dashboard: one HTML page rendered on the server from a ``ClusterView``.

No scripts, no forms, no links out, nothing that writes: the page refreshes itself every few
seconds (a ``<meta http-equiv="refresh">``) and shows only what the views show (names,
counts, reasons the scheduler wrote) — no Secrets, tokens or environment. Colours repeat
what the text says (each GPU cell has a title and the legend names every kind).
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

from scheduler.model.durations import format_duration
from scheduler.views import html_chargeback, html_use
from scheduler.views.state import (
    ClusterView,
    GangFailures,
    GangRow,
    NodeRow,
    QueueRow,
    budget_text,
    budgets,
    gang_labels,
    interactive,
    interactive_counts,
    interactive_text,
    queue_names,
    remembered,
    remembers,
)

REFRESH_SECONDS = 5
PALETTE = ("#1f77b4", "#9467bd", "#2ca02c", "#d62728", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#ff7f0e", "#7f7f7f")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.2rem 2rem; color: #1d1d1f; }
h1 { font-size: 1.35rem; margin: 0 0 .2rem; } h2 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
.meta { color: #555; font-size: .85rem; }
table { border-collapse: collapse; font-size: .85rem; }
th, td { border-bottom: 1px solid #e3e3e3; padding: .22rem .6rem; text-align: left;
         vertical-align: top; }
th { background: #f5f5f7; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.why { max-width: 40rem; color: #333; }
.grid { display: flex; flex-wrap: wrap; gap: .9rem 1.4rem; }
.node { font-size: .75rem; } .cells { display: flex; gap: 2px; margin-top: 2px; }
.cell { width: 14px; height: 14px; border-radius: 2px; box-sizing: border-box; }
.free { background: #fff; border: 1px solid #bbb; }
.other { background: #c7c7c7; }
.reserved { background: repeating-linear-gradient(45deg, #f6c343 0 3px, #fff 3px 6px);
            border: 1px solid #d4a017; }
.stranded { background: #fff; border: 2px dashed #d62728; }
.borrowed { outline: 2px solid #000; outline-offset: -2px; }
.legend { margin: .3rem 0 .6rem; font-size: .8rem; }
.legend > span { display: inline-flex; align-items: center; gap: .3rem; margin-right: 1rem; }
.legend .cell { display: inline-block; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px;
          margin-right: .35rem; }
.tag { display: inline-block; padding: 0 .35rem; border-radius: .6rem; background: #eef;
       font-size: .75rem; }
.tag.interactive { background: #f3e5f5; color: #6a1b9a; }
.failed { color: #b00020; } .disrupted { color: #8a5a00; }
.failures h3 { font-size: .9rem; margin: .8rem 0 .3rem; }
"""


def queue_colors(view: ClusterView) -> dict[str, str]:
    """A colour per queue, from ``PALETTE`` in the order of ``queue_names``: distinct while
    there are no more queues than colours (a hash of the name gave the shipped ``team-a`` and
    ``team-b`` the same one), and the same on every refresh while the queues stay the same."""
    return {q: PALETTE[i % len(PALETTE)] for i, q in enumerate(queue_names(view))}


def render(view: ClusterView, title: str = "gang-scheduler") -> str:
    when = datetime.fromtimestamp(view.now, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    colors, labels = queue_colors(view), gang_labels(view)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">',
        f"<title>{escape(title)}</title><style>{_STYLE}{html_use.STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p class='meta'>Read-only view of the scheduler's last cycle at {when}: "
        f"{len(view.running)} gangs running, {len(view.pending)} pending"
        f"{f', {len(view.failed)} failed' if view.failed else ''}. "
        f"Refreshes every {REFRESH_SECONDS} s.</p>",
        "<h2>Queues</h2>", _queues(view, colors),
        "<h2>Pending gangs</h2>", _pending(view.pending, labels),
        "<h2>Running gangs</h2>", _running(view.running, labels),
    ]
    if html_use.measured(view.running):
        parts += ["<h2>GPU use by rank</h2>", html_use.section(view.running, labels)]
    if view.failed:
        parts += ["<h2>Failed gangs</h2>", _failed(view.failed, labels)]
    failing = [g for g in (*view.pending, *view.running, *view.failed) if g.failures]
    if failing:
        parts += ["<h2>Last failures</h2>", _failures(failing, labels)]
    if view.nodes is not None:
        parts += ["<h2>GPUs by pool</h2>", _pools(view.nodes, colors)]
    parts += html_chargeback.section(view)
    parts += ["<h2>Recent preemptions and reservations</h2>", _events(view),
              "</body></html>"]
    return "\n".join(parts) + "\n"


def _queues(view: ClusterView, colors: dict[str, str]) -> str:
    pools = sorted({p.pool for q in view.queues for p in q.pools})
    head = "".join(f"<th>{escape(p)}: in use / nominal GPUs</th>" for p in pools)
    memory = remembers(view)  # fair share with memory on: what each queue is remembered for
    idle = any(q.idle_gpus is not None for q in view.queues)  # GPU metrics read
    budgeted = budgets(view)  # a queue has a GPU-hour budget
    tiers = interactive_counts(view)  # interactive gangs shown
    rows = [f"<table id='queues'><tr><th>queue</th><th>weight</th>{head}<th>fair share</th>"
            "<th>usage share</th><th>running</th><th>pending</th>"
            f"{'<th>remembered GPU-h</th>' if memory else ''}"
            f"{'<th>idle GPUs</th>' if idle else ''}"
            f"{'<th>budget: used / GPU-h</th>' if budgeted else ''}"
            f"{'<th>interactive: running / pending</th>' if tiers is not None else ''}</tr>"]
    for q in view.queues:
        cells = []
        for pool in pools:
            p = next((x for x in q.pools if x.pool == pool), None)
            if p is None:
                cells.append("<td class='n'>-</td>")
                continue
            extra = (f" <span class='tag'>borrowed {p.borrowed}</span>" if p.borrowed else "")
            extra += f" <span class='tag'>lent {p.lent}</span>" if p.lent else ""
            cells.append(f"<td class='n'>{p.allocated_text()} / {p.nominal}{extra}</td>")
        swatch = f"<span class='swatch' style='background:{colors[q.name]}'></span>"
        name = "&nbsp;&nbsp;&nbsp;&nbsp;" * q.depth + swatch + escape(q.name)
        rows.append(
            f"<tr data-queue='{escape(q.name)}'><td>{name}</td><td class='n'>{q.weight:g}</td>"
            f"{''.join(cells)}<td class='n'>{q.fair_share:.2f}</td>"
            f"<td class='n'>{q.usage_share:.2f}</td><td class='n'>{q.running}</td>"
            f"<td class='n'>{q.pending}</td>"
            f"{_remembered_cell(q) if memory else ''}"
            f"{_idle_cell(q.idle_gpus) if idle else ''}"
            f"{_budget_cell(q) if budgeted else ''}"
            f"{_tier_cell(tiers, q.name) if tiers is not None else ''}</tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _tier_cell(counts: dict[str, tuple[int, int]], queue: str) -> str:
    return f"<td class='n'>{interactive_text(counts, queue)}</td>"


def _name(g: GangRow, labels: dict[str, str]) -> str:
    """A gang's name cell; an interactive gang's marked (a notebook or debugging session:
    considered first, never preempted by batch)."""
    mark = " <span class='tag interactive'>interactive</span>" if interactive(g) else ""
    return f"<td>{escape(labels[g.id])}{mark}</td>"


def _remembered_cell(q: QueueRow) -> str:
    return f"<td class='n'>{remembered(q)}</td>"


def _budget_cell(q: QueueRow) -> str:
    """Used of the budget; marked once used up (the queue starts nothing new)."""
    spent = q.budget is not None and q.budget.spent
    return f"<td class='n{' failed' if spent else ''}'>{escape(budget_text(q))}</td>"


def _idle_cell(gpus: int | None) -> str:
    return "<td class='n'>-</td>" if gpus is None else \
        f"<td class='n{' use-flag' if gpus else ''}'>{gpus}</td>"


def _pending(rows: tuple[GangRow, ...], labels: dict[str, str]) -> str:
    if not rows:
        return "<p id='pending'>No gang is waiting.</p>"
    failing = any(g.failures for g in rows)
    out = ["<table id='pending'><tr><th>#</th><th>in queue</th><th>gang</th><th>queue</th>"
           "<th>GPUs</th><th>reason</th><th>ETA</th><th>why</th>"
           f"{_LAST if failing else ''}</tr>"]
    for g in rows:
        out.append(
            f"<tr data-gang='{escape(g.id)}'><td class='n'>{_pos(g.cluster_position)}</td>"
            f"<td class='n'>{_pos(g.queue_position)}</td>{_name(g, labels)}"
            f"<td>{escape(g.queue)}</td><td class='n'>{g.gpus}</td><td>{escape(g.reason)}</td>"
            f"<td class='n'>{format_duration(g.eta_seconds)}</td>"
            f"<td class='why'>{escape(g.message)}</td>"
            f"{_last_failure(g.failures) if failing else ''}</tr>")
    out.append("</table>")
    return "\n".join(out)


def _running(rows: tuple[GangRow, ...], labels: dict[str, str]) -> str:
    if not rows:
        return "<p id='running'>No gang is running.</p>"
    failing = any(g.failures for g in rows)
    measured = html_use.measured(rows)
    out = ["<table id='running'><tr><th>gang</th><th>queue</th><th>GPUs</th><th>age</th>"
           f"{'<th>GPU use</th>' if measured else ''}"
           f"<th>ranks: node (state)</th>{_LAST if failing else ''}</tr>"]
    for g in rows:
        ranks = "<br>".join(f"rank {escape(r.rank)}: {escape(r.node or '-')} "
                            f"({escape(r.phase)})" for r in g.ranks)
        out.append(f"<tr data-gang='{escape(g.id)}'>{_name(g, labels)}"
                   f"<td>{escape(g.queue)}</td><td class='n'>{g.gpus}</td>"
                   f"<td class='n'>{format_duration(g.age_seconds)}</td>"
                   f"{html_use.use_cell(g) if measured else ''}<td>{ranks}</td>"
                   f"{_last_failure(g.failures) if failing else ''}</tr>")
    out.append("</table>")
    return "\n".join(out)


_LAST = "<th>last failure</th>"


def _last_failure(found: GangFailures | None) -> str:
    """The compact cell: red where the user's code failed, amber where the pods were only
    taken away (preempted, evicted, node lost)."""
    if found is None:
        return "<td>-</td>"
    kind = "disrupted" if all(r.disrupted for r in found.ranks) else "failed"
    return f"<td class='last-failure {kind}'>{escape(found.summary)}</td>"


def _failed(rows: tuple[GangRow, ...], labels: dict[str, str]) -> str:
    out = ["<table id='failed'><tr><th>gang</th><th>queue</th>"
           f"{_LAST}</tr>"]
    out += [f"<tr data-gang='{escape(g.id)}'><td>{escape(labels[g.id])}</td>"
            f"<td>{escape(g.queue or '-')}</td>{_last_failure(g.failures)}</tr>" for g in rows]
    out.append("</table>")
    return "\n".join(out)


def _failures(rows: list[GangRow], labels: dict[str, str]) -> str:
    """Each failing gang's newest failure per rank, as ``explain`` words them, and what its
    Job's backoff does next."""
    out = ["<div id='failures' class='failures'>"]
    for g in rows:
        found = g.failures
        if found is None:
            continue
        earlier = f" ({found.earlier} earlier kept)" if found.earlier else ""
        out.append(f"<div data-gang='{escape(g.id)}'><h3>{escape(labels[g.id])}{earlier}</h3>"
                   "<table><tr><th>rank</th><th>pod</th><th>what happened</th><th>when</th>"
                   "<th>message</th><th>retries</th></tr>")
        for r in found.ranks:
            kind = "disrupted" if r.disrupted else "failed"
            when = "unknown" if r.age_seconds is None else \
                f"{format_duration(r.age_seconds)} ago"
            retries = "<br>".join(escape(t) for t in (r.retries, r.next) if t)
            out.append(f"<tr data-rank='{escape(r.rank or r.pod)}'>"
                       f"<td>{escape(r.rank or '-')}</td><td>{escape(r.pod)}</td>"
                       f"<td class='{kind}'>{escape(r.what)}</td><td class='n'>{when}</td>"
                       f"<td class='why'>{escape(r.message)}</td><td>{retries}</td></tr>")
        out.append("</table>")
        out += [f"<p class='why'>Job {escape(j.job)}: {escape(j.retries)}"
                f"{'<br>' + escape(j.next) if j.next else ''}</p>" for j in found.jobs]
        out.append("</div>")
    out.append("</div>")
    return "\n".join(out)


def _cells(n: NodeRow, colors: dict[str, str]) -> str:
    cells = []
    borrowed = n.borrowed
    for queue, gpus in n.used:
        for _ in range(gpus):
            extra, what = (" borrowed", f"{queue}, borrowed quota") if borrowed > 0 else \
                ("", queue)
            borrowed -= 1 if borrowed > 0 else 0
            cells.append(f"<div class='cell used{extra}' title='{escape(what)}' "
                         f"style='background:{colors[queue]}'></div>")
    cells += ["<div class='cell other' title='other pods'></div>"] * n.other
    kind = "reserved" if n.reserved else "stranded" if n.stranded else "free"
    cells += [f"<div class='cell {kind}' title='{kind}'></div>"] * n.free
    return "".join(cells)


def _pools(nodes: tuple[NodeRow, ...], colors: dict[str, str]) -> str:
    keys = (("used' style='background:#1f77b4", "allocated to a queue (its colour)"),
            ("used borrowed' style='background:#1f77b4", "borrowed quota"),
            ("reserved", "reserved for a waiting gang"),
            ("stranded", "stranded: no waiting gang fits, one waits for the pool"),
            ("other", "other pods"),
            ("free", "free"))
    legend = "<div class='legend'>" + "".join(
        f"<span><span class='cell {cls}'></span>{escape(text)}</span>" for cls, text in keys
    ) + "</div>"
    out = [legend]
    for pool in sorted({n.pool for n in nodes}):
        mine = [n for n in nodes if n.pool == pool]
        used = sum(n.gpus - n.free for n in mine)
        total = sum(n.gpus for n in mine)
        out.append(f"<h3 style='font-size:.9rem'>{escape(pool)}: {used} of {total} GPUs in use"
                   "</h3><div class='grid'>")
        out += [f"<div class='node' data-node='{escape(n.name)}'>{escape(n.name)} "
                f"({n.free} free)<div class='cells'>{_cells(n, colors)}</div></div>" for n in mine]
        out.append("</div>")
    return "\n".join(out)


def _events(view: ClusterView) -> str:
    if not view.events:
        return "<p id='events'>None since the scheduler started.</p>"
    out = ["<table id='events'><tr><th>when</th><th>what</th><th>gang</th><th>why</th></tr>"]
    for e in view.events:
        when = datetime.fromtimestamp(e.at, UTC).strftime("%H:%M:%S")
        out.append(f"<tr><td>{when}</td><td>{escape(e.kind)}</td><td>{escape(e.gang)}</td>"
                   f"<td class='why'>{escape(e.message)}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _pos(value: int | None) -> str:
    return "-" if value is None else str(value)
