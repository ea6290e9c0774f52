"""Reports of a simulation: a terminal table, PNG plots, a self-contained HTML page, JSON and
CSV. `write_report` writes them all into one directory; `print_summary` prints the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from simulator.metrics import PolicyRun
from simulator.report import data, html, plots
from simulator.report.info import RunInfo
from simulator.report.table import classes_table, print_summary, summary_table

__all__ = ["RunInfo", "classes_table", "print_summary", "summary_table", "write_report"]


def write_report(
    out_dir: str | Path, runs: Sequence[PolicyRun], info: RunInfo, *, with_plots: bool = True
) -> dict[str, Path]:
    """Write every report file into *out_dir* (created if needed); returns name -> path.

    Files: ``summary.json``, ``summary.csv``, ``queues.csv``, ``classes.csv``,
    ``outcomes.csv``, and unless *with_plots* is False ``utilization.png``, ``backlog.png``,
    ``queueing_delay_cdf.png``, ``queue_shares.png``, ``fairness_over_time.png``; finally
    ``report.html`` embedding the plots.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    reports = [run.report for run in runs]
    files = {
        "summary.json": data.write_json(out / "summary.json", reports, info),
        "summary.csv": data.write_summary_csv(out / "summary.csv", reports),
        "queues.csv": data.write_queues_csv(out / "queues.csv", reports),
        "classes.csv": data.write_classes_csv(out / "classes.csv", reports),
        "outcomes.csv": data.write_outcomes_csv(out / "outcomes.csv", runs),
    }
    images: dict[str, Path] = {}
    if with_plots:
        images["utilization"] = plots.plot_utilization(runs, out / "utilization.png")
        images["backlog"] = plots.plot_backlog(runs, out / "backlog.png")
        images["queueing_delay_cdf"] = plots.plot_queueing_cdf(runs, out / "queueing_delay_cdf.png")
        images["queue_shares"] = plots.plot_queue_shares(runs, out / "queue_shares.png")
        images["fairness_over_time"] = plots.plot_fairness_over_time(
            runs, out / "fairness_over_time.png")
    files.update({path.name: path for path in images.values()})
    page = out / "report.html"
    page.write_text(html.render_html(reports, info, images), encoding="utf-8")
    files["report.html"] = page
    return files
