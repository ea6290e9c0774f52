"""The dashboard's "GPU-hours" table: today and this month so far, per queue, allocated,
used and idle GPU-hours and cost, from the chargeback rows of the view (``ClusterView.gpu_hours``).

Apart from ``html`` so that the page's main module gains one call, not another table. Used
and idle show "-" when no GPU utilisation source told the idle GPUs (unknown, not zero).
The rows come from the scheduler's in-memory ledger: since the process started; the full
history is ``gang-scheduler chargeback --prometheus``.
"""

from __future__ import annotations

from html import escape

from scheduler.report.chargeback import Row, day_of, merged
from scheduler.views.state import ClusterView


def section(view: ClusterView) -> list[str]:
    """The heading and table, or nothing when the view carries no GPU-hours."""
    if not view.gpu_hours:
        return []
    per_queue = merged(view.gpu_hours, lambda r: (r.period, r.queue, "", ""))
    today = day_of(view.now).isoformat()
    month = today[:7]
    cells = {(r.queue, r.period): r for r in per_queue}
    queues = sorted({r.queue for r in per_queue})
    head = "<th>GPU-h</th><th>used GPU-h</th><th>idle GPU-h</th><th>cost</th>"
    rows = ["<table id='gpu-hours'><tr><th rowspan='2'>queue</th>"
            f"<th colspan='4'>today ({today} UTC)</th>"
            f"<th colspan='4'>this month ({month})</th></tr>"
            f"<tr>{head}{head}</tr>"]
    for q in queues:
        rows.append(f"<tr data-queue='{escape(q)}'><td>{escape(q)}</td>"
                    f"{_figures(cells.get((q, today)))}{_figures(cells.get((q, month)))}</tr>")
    rows.append("</table>")
    note = ("<p class='meta'>Allocated GPU-hours and their cost since the scheduler started "
            "(its in-memory ledger; <code>gang-scheduler chargeback --prometheus</code> reads "
            "the durable history). Used = allocated - idle; \"-\": no GPU utilisation source "
            "told the idle GPUs.</p>")
    return ["<h2>GPU-hours</h2>", "\n".join(rows), note]


def _figures(row: Row | None) -> str:
    if row is None:
        return "<td class='n'>-</td>" * 4
    return (f"<td class='n'>{_hours(row.allocated_gpu_hours)}</td>"
            f"<td class='n'>{_hours(row.used_gpu_hours)}</td>"
            f"<td class='n'>{_hours(row.idle_gpu_hours)}</td>"
            f"<td class='n'>{row.cost:,.2f} {escape(row.currency)}</td>")


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"
