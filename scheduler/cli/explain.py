"""`gang-scheduler explain NAMESPACE/NAME`: why a gang waits, and what would let it start.

It reads the cluster, runs the scheduler's own pure ``decide`` on that view, and prints the
gang's queue, its position in queue order, the reason, any reservation or nomination, and
what would change the answer (quota, free capacity, topology). It also shows what the running
scheduler last wrote on the gang (its pods' ``PodScheduled`` condition), so a difference
between the two views is visible rather than hidden.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import Any

from scheduler.cli._kube import CONTEXT_HELP, KUBECONFIG_HELP
from scheduler.cli._rows import row
from scheduler.model.demand import gpus_of

EPILOG = """\
examples:
  gang-scheduler explain team-a/llama-70b            # a PodGroup, a Job or a lone pod
  gang-scheduler explain team-a/llama-70b-worker-3       # one of its pods: resolved to the gang
  gang-scheduler explain team-a/llama-70b --kubeconfig ~/.kube/config --context prod

The gang id is NAMESPACE/NAME of its PodGroup (or Volcano group name), its Job, or the pod;
the name of any of its pods works too, and so does the name of the Job, JobSet or TrainJob
it runs for (each of its gangs is explained; one with no pods right now, a preempted Job
waiting for its controller, says so). With namespace-only RBAC (a tenant), explain shows the
gang as its namespace has it and the running scheduler's last answer, and says what it could
not see; with cluster-wide read access it also re-runs the scheduler's decision.
"""


#: A gang none of whose pods is pending or running, and some failed (``views.failures``).
FAILED_STATE = "no pending or running pods; how its last ones ended: see last failures"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("explain", help="why is this gang pending, and what would let it run",
                       description=__doc__, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("gang", metavar="NAMESPACE/NAME")
    p.add_argument("--kubeconfig", metavar="FILE", help=KUBECONFIG_HELP)
    p.add_argument("--context", metavar="NAME", help=CONTEXT_HELP)
    p.add_argument("--config", metavar="FILE", help="the scheduler's config file (scheduler name, "
                   "labels, gpuMetrics); default: built-in defaults")
    p.add_argument("--gpu-metrics-url", metavar="URL",
                   help="Prometheus holding the GPU metrics (dcgm-exporter): a running gang's "
                   "ranks get their utilisation, idle and straggler ranks named; overrides "
                   "the config's gpuMetrics.prometheus")
    p.set_defaults(handler=run)


def explain_text(gang_id: str, cache: Any, policies: Any, now: float,
                 remembered: Mapping[str, tuple[float, float]] | None = None
                 ) -> tuple[str, bool]:
    """The report for *gang_id* and whether the gang was found (pure given its inputs).

    *remembered*: queue -> (GPU-seconds, as of when) from the Queue statuses (fair share with
    memory), so the decision re-run here ranks queues as the running scheduler does."""
    from policies.usage_memory import UsageMemory
    from scheduler.decide import cycle
    from scheduler.decide.plan import explain as plan_explain

    inp = cache.cycle_input(now)
    pending = {g.id: g for g in inp.gangs.pending}
    running = inp.snapshot.running.get(gang_id)
    lines = [f"gang {gang_id}"]
    if gang_id not in pending:
        if running is not None:
            nodes = ", ".join(running.nodes)
            short = running.shortfall
            lines += [row("state", _running_state(running)),
                      row("queue", running.gang.queue), row("nodes", nodes)]
            if short is not None:
                lines.append(row("members", short.describe()))
            standing = _reclaim_standing(running, inp.snapshot, policies.current())
            if standing:
                lines.append(row("reclaim", standing))
            return "\n".join(lines), True
        problem = inp.gangs.problems.get(gang_id)
        if problem:
            lines += [row("state", "cannot be formed"), row("why", problem)]
            return "\n".join(lines), True
        if cache.failures(gang_id):
            lines.append(row("state", FAILED_STATE))
            return "\n".join(lines), True
        lines.append(row("state", "not found: no pending or running pods of this scheduler "
                                   "belong to it"))
        return "\n".join(lines), False
    gang = pending[gang_id]
    in_force = policies.current()
    usage = UsageMemory.restored(remembered or {}, now,
                                 in_force.scheduler.usage_half_life_seconds)
    plan = cycle.decide(inp.snapshot, list(pending.values()), in_force, now, memory=usage)
    reason = plan.pending.get(gang_id)
    lines += [
        row("queue", gang.queue),
        row("size", f"{gang.size} pods in {len(gang.roles)} role(s), minMember "
                     f"{gang.min_member} ({gang.members_present} present)"),
        row("needs", gang.min_requests.describe()),
        row("priority", gang.priority),
    ]
    if running is not None and running.shortfall is not None:
        lines.append(row("running", running.shortfall.describe()))
    if plan.bind_of(gang_id) is not None:
        lines.append(row("state", "would be bound in the next cycle"))
    elif reason is not None:
        lines += [row("state", f"pending: {reason.category}"),
                  row("position", f"{reason.position} of {len(plan.order)} in queue order"
                       if reason.position else "not ordered (cannot be considered yet)"),
                  row("why", reason.message)]
        if reason.estimated_start is not None:
            lines.append(row("starts", describe_estimate(reason.estimated_start, now)))
        if in_force.scheduler.usage_half_life_seconds > 0:
            lines.append(row("fair share", memory_line(gang.queue, in_force, usage, now)))
    extra = [ln for ln in plan_explain(plan, gang_id).splitlines() if ": pending, " not in ln]
    if extra:
        lines += ["", "what this cycle does for it:", *("  " + ln for ln in extra)]
    free = inp.snapshot.total_free()
    lines += ["", f"cluster free now: {gpus_of(free)} GPUs of "
                  f"{gpus_of(inp.snapshot.total_allocatable())}"]
    return "\n".join(lines), True


def memory_line(queue: str, policies: Any, usage: Any, now: float) -> str:
    """What fair share with memory holds against *queue* and its siblings: ``b remembered
    for 12.0 GPU-h borrowed (half-life 1h00m); ahead of it while both borrow: a 0.0``."""
    from scheduler.model.durations import format_duration

    half_life = policies.scheduler.usage_half_life_seconds
    hours = {q: v / 3600 for q, v in usage.at(now, half_life).items()}
    queues = policies.queues
    mine = hours.get(queue, 0.0)
    parent = queues.parent_of(queue)
    ahead = sorted((hours.get(s, 0.0), s) for s in queues.children_of(parent)
                   if s != queue and hours.get(s, 0.0) < mine) if parent else []
    text = (f"{queue} remembered for {mine:,.1f} GPU-h borrowed "
            f"(half-life {format_duration(half_life)})")
    if ahead:
        text += ("; ahead of it while both borrow, having borrowed less: "
                 + ", ".join(f"{s} {h:,.1f}" for h, s in ahead))
    return text


def _reclaim_standing(running: Any, snapshot: Any, in_force: Any) -> str:
    """Of a gang of a semi-preemptible queue, what reclaim could take (``policies.semi``)."""
    from policies import semi
    from policies.quota import QuotaTree

    queue = in_force.queues.get(running.gang.queue)
    if queue is None or not queue.preemption.semi_preemptible:
        return ""
    return semi.describe_standing(queue, running, snapshot, QuotaTree.build(in_force.queues))


def _running_state(running: Any) -> str:
    """A running gang's state: short of members, being evicted, or just running."""
    if running.shortfall is not None:
        return "running below its minimum"
    if running.terminating:
        return "running; members terminating (evicted, preempted or deleted)"
    return "running"


def describe_estimate(start: float, now: float, made: float | None = None) -> str:
    """``2026-12-01T17:05:00Z (in 20m)``, and when the estimate was made if known."""
    from scheduler.model.durations import format_duration, format_time

    text = f"estimated {format_time(start)} (in {format_duration(max(0.0, start - now))})"
    return text if made is None else f"{text}, estimated at {format_time(made)}"


def partial_text(gang_id: str, cache: Any, unseen: tuple[str, ...], now: float
                 ) -> tuple[str, bool]:
    """The report when the reader may not see the whole cluster (a tenant's namespace RBAC):
    the gang as its namespace shows it, and what could not be seen. No fresh decision: without
    the nodes and the other namespaces' gangs it would be wrong, so the caller shows the
    running scheduler's last answer instead."""
    inp = cache.cycle_input(now)
    gang = next((g for g in inp.gangs.pending if g.id == gang_id), None)
    lines = [f"gang {gang_id}"]
    bound = [p for p in cache.gang_pods(gang_id) if p.node_name]
    if gang is not None:
        lines += [
            row("queue", gang.queue),
            row("size", f"{gang.size} pods in {len(gang.roles)} role(s), minMember "
                         f"{gang.min_member} ({gang.members_present} present)"),
            row("needs", gang.min_requests.describe()),
            row("priority", gang.priority),
            row("state", f"pending ({len(bound)} bound)" if bound else "pending"),
        ]
    elif bound:
        nodes = ", ".join(sorted({p.node_name for p in bound}))
        running = inp.snapshot.running.get(gang_id)
        state = _running_state(running) if running is not None else "running"
        lines += [row("queue", cache.queue_of(gang_id) or "?"),
                  row("state", f"{state} ({len(bound)} pods)"), row("nodes", nodes)]
        if running is not None and running.shortfall is not None:
            lines.append(row("members", running.shortfall.describe()))
    elif gang_id in inp.gangs.problems:
        lines += [row("state", "cannot be formed"), row("why", inp.gangs.problems[gang_id])]
    elif cache.failures(gang_id):
        lines.append(row("state", FAILED_STATE))
    found = (gang is not None or bool(bound) or gang_id in inp.gangs.problems
             or bool(cache.failures(gang_id)))
    if not found:
        lines.append(row("state", "not found: no pending or running pods of this scheduler "
                                   "that you may see belong to it"))
    lines += ["", f"not visible to you: {'; '.join(unseen)}.",
              "A fresh decision needs the whole cluster, so this shows the running scheduler's "
              "last answer; the cluster-wide view needs the gang-scheduler-viewer ClusterRole "
              "(deploy/users)."]
    return "\n".join(lines), found


def resolve(target: str, cache: Any, now: float) -> tuple[str, str | None]:
    """The gang id for NAMESPACE/NAME, which may name a gang or one of its pods, and a line
    saying which gang a pod belongs to (None when the name was the gang's)."""
    if _known(target, cache, now):
        return target, None
    namespace, _, name = target.partition("/")
    gang = cache.gang_of_pod(namespace, name)
    if gang is None or gang == target:
        return target, None
    return gang, f"pod {target} belongs to gang {gang}"


def run(args: argparse.Namespace) -> int:
    from scheduler.cli._kube import ConnectError, connect, unreachable
    from scheduler.kube.client import ApiError, TransportError
    from scheduler.kube.oneshot import read_cluster
    from scheduler.run.config import ConfigError, load_config
    from scheduler.run.logconfig import configure_logging

    namespace, _, name = args.gang.partition("/")
    if not namespace or not name or "/" in name:
        print(f"error: {args.gang!r}: expected NAMESPACE/NAME (e.g. team-a/llama-70b)",
              file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"error: --config {exc}", file=sys.stderr)
        return 2
    try:
        gpu_metrics = _gpu_metrics(config.gpu_metrics, args.gpu_metrics_url)
    except ConfigError as exc:
        print(f"error: --gpu-metrics-url {exc}", file=sys.stderr)
        return 2
    configure_logging("error", "console")
    try:
        client = connect(args.kubeconfig, context=args.context)
        view = read_cluster(client, config, namespace=namespace)
        now = time.time()
        gang_id, via = resolve(args.gang, view.cache, now)
        workload = _workload(client, view.cache, args.gang, now) if via is None else None
        if via or workload:
            print(via or workload.via)  # type: ignore[union-attr]
        found = False
        for gid in workload.gangs if workload is not None else (gang_id,):
            found = _report(client, view, gid, workload, now, gpu_metrics) or found
    except ConnectError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (TransportError, ApiError) as exc:
        print(f"error: {unreachable(exc)}", file=sys.stderr)
        return 1
    return 0 if found else 1


def _workload(client: Any, cache: Any, target: str, now: float) -> Any:
    """The Job, JobSet or TrainJob *target* names when it is no gang or pod (None: none)."""
    from scheduler.cli import explain_workload as ew

    if _known(target, cache, now):
        return None
    found = ew.find(target, cache)
    if found is None and ew.trainjob_exists(client, target):
        found = ew.find(target, cache, trainjob=True)
    return found


def _known(gang_id: str, cache: Any, now: float) -> bool:
    inp = cache.cycle_input(now)
    return (any(g.id == gang_id for g in inp.gangs.pending) or gang_id in inp.snapshot.running
            or gang_id in inp.gangs.problems or bool(cache.gang_pods(gang_id)))


def _gpu_metrics(given: Any, url: str | None) -> Any:
    """The GPU metrics source: the config's, its URL replaced by ``--gpu-metrics-url``."""
    from scheduler.run.config import gpu_metrics_at

    return gpu_metrics_at(given, url) if url else given


def _report(client: Any, view: Any, gang_id: str, workload: Any, now: float,
            gpu_metrics: Any = None) -> bool:
    """Print the report of one gang and what the running scheduler last wrote on it; a gang
    of *workload* with no pods right now is told why (``explain_workload.gap_text``)."""
    from scheduler.cli import explain_workload as ew
    from scheduler.kube.oneshot import unschedulable_message

    if view.complete:
        text, found = explain_text(gang_id, view.cache, view.policies, now,
                                   view.policies.remembered())
    else:
        text, found = partial_text(gang_id, view.cache, view.unseen, now)
    if not found and workload is not None:
        from scheduler.cli.explain_kueue import kueue_hold

        text, found = ew.gap_text(workload, gang_id, ew.last_preemption(client, workload),
                                  now, held=kueue_hold(client, workload.jobs)), True
    from scheduler.cli.explain_use import gpu_use_text

    print(text + failures_of(gang_id, view.cache, now)
          + gpu_use_text(gang_id, view.cache, gpu_metrics, now))
    pod = _pending_pod(client, view.cache, gang_id)
    written = unschedulable_message(pod) if pod is not None else ""
    estimate, position = _last_estimate(client, gang_id, pod, now)
    if written:
        print(f"\nthe running scheduler last said: {written}")
    if estimate:
        print(f"the running scheduler's start estimate: {estimate}")
    if position:
        print(f"the running scheduler's queue position: #{position}")
    if not (written or estimate) and found and not view.complete:
        print("\nthe running scheduler has written nothing on this gang's pods yet")
    return found


def failures_of(gang_id: str, cache: Any, now: float) -> str:
    """The gang's "last failures" section ("" without any), its Jobs read from *cache*."""
    from scheduler.views.failures import failures_text

    namespace = gang_id.partition("/")[0]
    return failures_text(cache.failures(gang_id), lambda job: cache.job(f"{namespace}/{job}"),
                         now)


def _last_estimate(client: Any, gang_id: str, pod: dict[str, Any] | None,
                   now: float) -> tuple[str, int]:
    """The running scheduler's estimate for the gang: its PodGroup's ``status.estimatedStart``,
    else its pending *pod*'s ``gangscheduler.io/estimated-start`` annotation, which every
    gang's pods carry ("" without either); and the PodGroup's ``status.queuePosition`` (0:
    none, or no PodGroup)."""
    from scheduler.kube.client import path_segment as seg
    from scheduler.kube.oneshot import annotation_time, status_time
    from scheduler.kube.write.status import PODGROUP_API
    from scheduler.model.workloads import ESTIMATE_TIME_ANNOTATION

    namespace, _, name = gang_id.partition("/")
    resp = client.request("GET", f"{PODGROUP_API}/namespaces/{seg(namespace)}/podgroups/"
                                 f"{seg(name)}")
    group = resp.json() if resp.ok else {}
    found = (group.get("status") or {}).get("queuePosition")
    position = found if isinstance(found, int) and found > 0 else 0
    start = status_time(group)
    if start is not None:
        return describe_estimate(start, now, status_time(group, "estimateTime")), position
    if pod is None or (start := annotation_time(pod)) is None:
        return "", position
    return describe_estimate(start, now, annotation_time(pod, ESTIMATE_TIME_ANNOTATION)), position


def _pending_pod(client: Any, cache: Any, gang_id: str) -> dict[str, Any] | None:
    """The gang's first pending pod as the apiserver has it (what the scheduler wrote)."""
    for pod in cache.gang_pods(gang_id):
        if pod.node_name:
            continue
        resp = client.request("GET", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
        if resp.ok:
            found: dict[str, Any] = resp.json()
            return found
    return None
