"""`gang-scheduler policy validate FILE...`: check queue policy files before applying them.

Prints every error with its object, field path and reason, or a short summary of what the
files define (queues, hierarchy, nominal quota per pool) so that a reviewer sees at a glance
what a change does.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from policies.guards import Guards
from policies.interactive import NO_CAPS, InteractivePolicy
from policies.queues import Packing, PolicySet, QueueSet, SchedulerPolicy
from policies.validation import read_files
from scheduler.model.durations import format_duration
from scheduler.model.resources import Resources, total

EPILOG = """\
examples:
  gang-scheduler policy validate scheduler/examples/queues/research.yaml
  gang-scheduler policy validate queues/*.yaml scheduler-policy.yaml

Files may contain several YAML documents and `kind: List` objects; they are validated
together, so parents may live in another file. Exit code: 0 valid, 1 invalid.
Error format:  FILE#DOC: QUEUE: FIELD.PATH: reason
  e.g. queues.yaml#2: team-a: spec.quotas[0].nominal.nvidia.com/gpu: must be >= 0, got -1
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "policy", help="work with queue policy files",
        description="Work with Queue and SchedulerPolicy files (gangscheduler.io/v1alpha1).")
    sub = parser.add_subparsers(dest="policy_command", metavar="ACTION")
    validate = sub.add_parser(
        "validate", help="check policy files and summarise them",
        description="Validate Queue and SchedulerPolicy objects; print every error with its "
                    "field path, or a summary of the queues, their hierarchy and total quota.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML policy files")
    validate.set_defaults(handler=run_validate)
    parser.set_defaults(handler=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def run_validate(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    result = read_files(args.files)
    for line in result.skipped:
        print(f"skipped {line}: not a Queue or SchedulerPolicy", file=out)
    if result.errors:
        for error in result.errors:
            print(error, file=out)
        print(f"{len(result.errors)} error(s)", file=out)
        return 1
    if not result.objects:
        print("error: no Queue or SchedulerPolicy objects in the files given", file=out)
        return 1
    print(summarise(result.policies), file=out)
    return 0



def _reservation(s: SchedulerPolicy) -> str:
    """``on (after 900s pending, at most 2 gangs at once)``; the settings only when not default."""
    if not s.reservation:
        return "off"
    extra = ([f"after {s.reserve_after_seconds:g}s pending"] if s.reserve_after_seconds else [])
    extra += [f"at most {s.max_reservations} gangs at once"] if s.max_reservations != 1 else []
    return f"on ({', '.join(extra)})" if extra else "on"


def _memory(s: SchedulerPolicy) -> str:
    """``, fair share remembers borrowed usage (half-life 2d00h)``; nothing when off."""
    if s.usage_half_life_seconds <= 0:
        return ""
    return (f", fair share remembers borrowed usage "
            f"(half-life {format_duration(s.usage_half_life_seconds)})")


def _packing(s: SchedulerPolicy) -> str:
    """``, packing fragmentation``; nothing for the default (best fit)."""
    return "" if s.packing is Packing.BEST_FIT else f", packing {s.packing}"


def summarise(policies: PolicySet) -> str:
    queues = policies.queues
    s = policies.scheduler
    lines = [f"{len(queues)} queue(s); scheduler policy: ordering {s.ordering}, "
             f"preemption {_on(s.preemption)}, reservation {_reservation(s)}, "
             f"backfill {_on(s.backfill)}{_memory(s)}{_packing(s)}", "", "hierarchy:"]
    for root in queues.children_of(None):
        lines.extend(_tree(queues, root, "  "))
    per_pool: dict[str, list[Resources]] = {}
    for queue in queues:
        for quota in queue.quotas:
            per_pool.setdefault(quota.pool, []).append(quota.nominal)
    lines.append("")
    lines.append("total nominal quota per pool:")
    for pool, parts in sorted(per_pool.items()):
        lines.append(f"  {pool}: {total(parts).describe()}")
    if not per_pool:
        lines.append("  (none: no queue may use any pool)")
    return "\n".join(lines)


def _tree(queues: QueueSet, name: str, indent: str) -> list[str]:
    q = queues.queues[name]
    who = ", ".join(q.namespaces) if q.namespaces else "none"
    lines = [f"{indent}{name}  weight {q.weight:g}, namespaces: {who}"]
    for pq in q.quotas:
        limits = "".join(f", {label} {', '.join(f'{v} {r}' for r, v in lim.items)}"
                         for label, lim in (("may borrow", pq.borrowing_limit),
                                            ("lends at most", pq.lending_limit)) if lim)
        lines.append(f"{indent}    {pq.pool}: {pq.nominal.describe()}{limits}")
    if q.guards:
        lines.append(f"{indent}    guards: {describe(q.guards)}")
    if q.interactive != NO_CAPS:
        lines.append(f"{indent}    interactive: {describe_interactive(q.interactive)}")
    for child in queues.children_of(name):
        lines.extend(_tree(queues, child, indent + "  "))
    return lines


def describe(g: Guards) -> str:
    """``max runtime 12h00m, budget 1,200 GPU-h per Week, ...``: a queue's guards, for
    people."""
    parts = []
    if g.max_runtime_seconds is not None:
        parts.append(f"max runtime {format_duration(g.max_runtime_seconds)}")
    if g.budget is not None:
        parts.append(f"budget {g.budget.gpu_hours:,g} GPU-h per {g.budget.period}")
    if g.max_running_gangs is not None:
        parts.append(f"at most {g.max_running_gangs} running gangs")
    if g.max_pending_gangs is not None:
        parts.append(f"at most {g.max_pending_gangs} pending gangs considered")
    return ", ".join(parts)


def describe_interactive(p: InteractivePolicy) -> str:
    """``at most 2 GPUs and 1 gang per user (label gangscheduler.io/user)``: a queue's
    per-user caps on interactive gangs, for people."""
    caps = [f"{n} {what}" for n, what in ((p.max_gpus_per_user, "GPUs"),
                                           (p.max_gangs_per_user, "gangs")) if n is not None]
    limit = f"at most {' and '.join(caps)} per user" if caps else "no per-user cap"
    return f"{limit} (user label {p.user_label})"


def _on(flag: bool) -> str:
    return "on" if flag else "off"

