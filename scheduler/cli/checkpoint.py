"""`gang-scheduler checkpoint mark`: record, from inside a training pod, that it just saved a
checkpoint (the ``gangscheduler.io/last-checkpoint`` annotation preemption reads).

The work is ``scheduler.checkpoint`` (standard library only, so images without
gang-scheduler can copy that one file instead).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

EPILOG = """\
examples:
  # inside a training pod, after saving a checkpoint
  gang-scheduler checkpoint mark                       # now, on this pod ($POD_NAME)
  gang-scheduler checkpoint mark --at 2026-12-01T09:30:00Z
  gang-scheduler checkpoint mark --job ddp-train       # on the Job (outlives its pods)

setup:
  The pod's ServiceAccount needs the gang-scheduler-checkpoint-writer ClusterRole
  (deploy/users/checkpoint-writer.yaml) bound in its namespace (kubectl -n team-a create
  rolebinding trainer-checkpoints --clusterrole gang-scheduler-checkpoint-writer
  --serviceaccount team-a:trainer), and POD_NAME set from the downward API (env valueFrom
  fieldRef metadata.name).
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("checkpoint", help="record a checkpoint time from inside a training pod",
                       description=__doc__, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    m = actions.add_parser("mark", help="annotate this pod (or its Job / PodGroup) with the "
                           "checkpoint time", description=__doc__, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("--at", metavar="TIME", help="RFC 3339 time with a zone (default: now)")
    which = m.add_mutually_exclusive_group()
    which.add_argument("--pod", metavar="NAME", help="the pod to annotate (default: $POD_NAME)")
    which.add_argument("--job", metavar="NAME", help="annotate this batch/v1 Job instead")
    which.add_argument("--podgroup", metavar="NAME",
                       help="annotate this scheduling.x-k8s.io PodGroup instead")
    m.add_argument("-n", "--namespace", help="default: the pod's own namespace")
    m.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from scheduler import checkpoint

    target, name = next(((t, n) for t, n in (("job", args.job), ("podgroup", args.podgroup))
                         if n), ("pod", args.pod))
    try:
        when = datetime.fromisoformat(args.at.replace("Z", "+00:00")) if args.at else None
        written = checkpoint.mark(when, target=target, name=name, namespace=args.namespace)
    except ValueError as exc:
        print(f"checkpoint mark: --at {args.at}: not an RFC 3339 time ({exc})", file=sys.stderr)
        return 2
    except checkpoint.CheckpointError as exc:
        print(f"checkpoint mark: {exc}", file=sys.stderr)
        return 1
    print(f"{checkpoint.ANNOTATION}={written} on the {target}")
    return 0
