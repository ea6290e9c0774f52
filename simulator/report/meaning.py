""""What this means": a short paragraph in plain words, generated from the figures.

A capacity planner reads a table of twenty figures per policy and has to know which ones
answer their question. These sentences say it for this run: how busy the cluster was while
work arrived (not over the drain after the last arrival), whether work piled up faster than
the cluster could serve it, which policy made jobs wait least and what its preemptions cost.
Every number in them is one the report shows; nothing is assumed that the run did not measure.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.metrics import HOUR, PolicyReport
from simulator.report.fmt import hours, number, percent


def capacity_gpus(report: PolicyReport) -> float:
    """Mean GPUs in the cluster over the horizon (failed nodes count while they are down)."""
    return report.gpu_hours_total * HOUR / report.horizon_seconds if report.horizon_seconds else 0


def what_this_means(reports: Sequence[PolicyReport]) -> list[str]:
    """The paragraph's sentences, best policy first; empty without reports."""
    if not reports:
        return []
    out: list[str] = []
    started = [r for r in reports if r.queueing_delay.p95 is not None]
    if started:
        best = min(started, key=lambda r: (r.queueing_delay.p95 or 0.0, r.policy))
        others = [r for r in started if r is not best]
        line = (f"{best.policy} made jobs wait least: 95% of them started within "
                f"{hours(best.queueing_delay.p95)} h")
        if others:
            worst = max(others, key=lambda r: r.queueing_delay.p95 or 0.0)
            line += (f", against {hours(worst.queueing_delay.p95)} h under {worst.policy}")
        out.append(line + ".")
    else:
        best = reports[0]
    window = best.arrival_end - best.arrival_start
    drain = max(0.0, best.horizon_seconds - best.arrival_end)  # the clock starts at 0
    if best.gpu_utilization_arrivals is not None:
        out.append(
            f"While jobs arrived ({hours(window)} h) the cluster's GPUs were "
            f"{percent(best.gpu_utilization_arrivals)} busy under {best.policy} "
            f"({percent(best.gpu_utilization_steady)} once warmed up); the whole-horizon "
            f"{percent(best.gpu_utilization)} is lower mainly because it includes "
            f"{hours(drain)} h after the last arrival, when the cluster drains.")
    capacity = capacity_gpus(best)
    if best.backlog_gpus_mean is not None and capacity > 0:
        backlog = best.backlog_gpus_mean
        if backlog > capacity:
            verdict = ("more than the whole cluster: work arrived faster than it could be "
                       "served, so waits grow with the length of the trace and more GPUs (or "
                       "less work) would shorten them")
        elif backlog > 0.1 * capacity:
            verdict = ("a sizeable queue: the cluster keeps up, but jobs often wait for a "
                       "gang-sized hole")
        else:
            verdict = "little: the cluster has capacity to spare for this load"
        out.append(f"On average {number(backlog)} GPUs of submitted work waited during the "
                   f"arrival window, against {number(capacity, 0)} GPUs in the cluster: "
                   f"{verdict}.")
    if best.jain_index_demand is not None:
        fair = best.jain_index_demand
        word = "close to fair" if fair >= 0.95 else "uneven" if fair >= 0.8 else "unfair"
        out.append(f"Sharing between queues was {word} under {best.policy} (fairness index "
                   f"{fair:.3f}, where 1 means every queue got its fair share).")
    if best.preemptions and best.gpu_hours_busy > 0:
        share = best.gpu_hours_lost / best.gpu_hours_busy
        out.append(f"Under {best.policy}, preempted gangs ({best.preemptions:,}) and failed "
                   f"nodes, if any, threw away {number(best.gpu_hours_lost)} GPU-hours of "
                   f"work, {percent(share)} of the busy GPU-time.")
    if best.total_cost > 0:
        out.append(f"The GPU-hours allocated cost {number(best.total_cost, 0)} {best.currency} "
                   f"at the configured prices.")
    return out
