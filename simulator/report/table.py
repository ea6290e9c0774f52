"""The terminal summary: policies side by side, one row per figure, best value in bold;
then a row per (policy, class of work)."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
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
    console = console or Console()
    console.print(summary_table(reports, title))
    if any(r.classes for r in reports):
        console.print(classes_table(reports))


#: Two-line headers: the table fits 80 columns without cutting a figure.
CLASS_COLUMNS = ("policy", "class", "jobs", "wait\np50 h", "wait\np95 h", "lost\nGPU-h",
                 "gangs\npreempted", "jobs\nstopped")
CLASS_NOTE = ("Per class of work (the trace's class, or the gang's size when it names none): "
              "queueing delay (wait) of its started jobs; GPU-hours of work lost to "
              "preemption, node failures and guard stops (since the last checkpoint); gangs "
              "preempted (guard stops included); jobs stopped for good by a runaway guard.")


def class_cells(report: PolicyReport) -> list[tuple[str, ...]]:
    """The per-class rows of *report* as text, `CLASS_COLUMNS` in order (terminal and HTML)."""
    return [(report.policy, c.job_class, f"{c.jobs:,}", fmt.hours(c.queueing_delay_p50),
             fmt.hours(c.queueing_delay_p95), fmt.number(c.gpu_hours_lost),
             f"{c.preemptions:,}", f"{c.stopped:,}")
            for c in report.classes]


def classes_table(reports: Sequence[PolicyReport]) -> Table:
    table = Table(title="per class of work", header_style="bold", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, collapse_padding=True)
    for i, name in enumerate(CLASS_COLUMNS):
        table.add_column(name, justify="left" if i < 2 else "right", no_wrap=True)
    for report in reports:
        for cells in class_cells(report):
            table.add_row(*cells)
    table.caption = CLASS_NOTE
    table.caption_justify = "left"
    return table
