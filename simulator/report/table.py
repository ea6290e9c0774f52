"""The terminal summary: policies side by side, one row per figure, best value in bold."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from simulator.metrics import PolicyReport
from simulator.report import fmt


def summary_table(reports: Sequence[PolicyReport], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False, header_style="bold")
    # Labels wrap on a narrow terminal; figures never do (a cut-off number misleads).
    table.add_column("figure", style="dim", ratio=1, min_width=12)
    for report in reports:
        table.add_column(report.policy, justify="right", no_wrap=True, min_width=len(report.policy))
    for row in fmt.ROWS:
        best = fmt.best_columns(row, reports)
        cells = [
            f"[bold green]{row.text(row.value(r))}[/]" if i in best else row.text(row.value(r))
            for i, r in enumerate(reports)
        ]
        table.add_row(fmt.label(row, reports), *cells)
    table.caption = fmt.FAIRNESS
    table.caption_justify = "left"
    return table


def print_summary(
    reports: Sequence[PolicyReport], console: Console | None = None, title: str | None = None
) -> None:
    (console or Console()).print(summary_table(reports, title))
