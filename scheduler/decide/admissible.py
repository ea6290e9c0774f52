"""Which pending gangs ``decide`` considers at all, and why not the others.

A gang is considered once all its required members exist and it names a queue that exists,
is not being deleted, has gangs (a leaf) and admits its namespace. Otherwise it gets a
reason at once, outside the queue order; a gang still waiting for members is told early when
it could never be met: its PodGroup ``minResources`` (the coscheduling plugin's check), or a
minimum of more members than the cluster's nodes can take pods (``min-member: 999999999999``
would otherwise wait for members forever, told only that they do not exist yet). A queue
being deleted stays in force for what it admitted (``QueueSet.terminating``: its running
gangs keep their quota and are accounted until they end) and admits nothing new, as
Kueue's terminating ClusterQueue does.
"""

from __future__ import annotations

from policies.queues import QueueSet
from policies.quota import QuotaLedger, QuotaTree
from scheduler.decide.plan import ReasonCategory
from scheduler.decide.recall import Admissible
from scheduler.model import Gang
from scheduler.model.resources import PODS
from scheduler.world.snapshot import Snapshot

R = ReasonCategory


def admissible(gang: Gang, snapshot: Snapshot, queues: QueueSet, tree: QuotaTree,
               parents: frozenset[str]) -> Admissible:
    """The gang's queue, or why the gang cannot be considered (*parents*: queues with
    children)."""
    present, needed = gang.members_present, gang.min_member
    if present < needed:
        unmeetable = (_min_member_unmeetable(gang, snapshot)
                      or _min_resources_unmeetable(gang, snapshot, queues, tree, parents))
        if unmeetable is not None:
            return unmeetable
        return (R.WAITING_FOR_MEMBERS, f"{present} of {needed} required members exist; the "
                "gang is considered once all of them do")
    queue = queues.get(gang.queue)
    if queue is None:
        return (R.NOT_ALLOWED, f"queue {gang.queue!r} does not exist; set label "
                f"gangscheduler.io/queue to {_open_to(gang.namespace, queues, parents)}")
    if queue.name in queues.terminating:
        return (R.NOT_ALLOWED, f"queue {queue.name} is being deleted: it admits no new gangs "
                "(those it admitted keep their quota until they end); submit to "
                f"{_open_to(gang.namespace, queues, parents)}")
    if queue.name in parents:
        under = _open_to(gang.namespace, queues, parents, under=queue.name)
        return (R.NOT_ALLOWED, f"queue {queue.name} is a parent queue and holds no gangs; "
                f"submit to {under}")
    if not queue.admits_namespace(gang.namespace):
        allowed = ", ".join(queue.namespaces) or "none"
        return (R.NOT_ALLOWED, f"namespace {gang.namespace} may not submit to queue "
                f"{queue.name} (allowed: {allowed}); submit to "
                f"{_open_to(gang.namespace, queues, parents)}, or extend spec.namespaces")
    return queue


def _open_to(namespace: str, queues: QueueSet, parents: frozenset[str],
             under: str | None = None) -> str:
    """The queues a gang of *namespace* may be submitted to (leaves that admit it; only
    those below *under* if given), as advice: naming a queue that would refuse the gang
    too only sends its user round in circles."""
    names = [name for name in queues.accepting(namespace, parents)
             if under is None or under in queues.path_of(name)[:-1]]
    if names:
        return "one of: " + ", ".join(names)
    where = f" under {under}" if under is not None else ""
    return (f"a queue that admits namespace {namespace} (none{where} does: ask an admin to "
            "add it to a queue's spec.namespaces)")


def _min_member_unmeetable(gang: Gang, snapshot: Snapshot
                           ) -> tuple[ReasonCategory, str] | None:
    """Does the gang need more members than every node together can take pods (their
    allocatable ``pods``)? No member created later can change that; added nodes could."""
    room = snapshot.total_allocatable().get(PODS)
    if gang.min_member <= room:
        return None
    return (R.PLACEMENT, f"minMember {gang.min_member} can never be met: "
            f"{gang.members_present} of {gang.min_member} members exist, and the cluster's "
            f"nodes hold at most {room} pods in all; lower minMember (the PodGroup's, or "
            "annotation gangscheduler.io/min-member) or add nodes")


def _min_resources_unmeetable(gang: Gang, snapshot: Snapshot, queues: QueueSet, tree: QuotaTree,
                              parents: frozenset[str]) -> tuple[ReasonCategory, str] | None:
    """Do the gang's ``minResources`` exceed what the cluster has, or what its queue could
    ever take in all its pools together? Then say so now, before every member exists."""
    want = gang.min_resources
    if want is None:
        return None
    capacity = snapshot.total_allocatable()
    over = [f"{want[r]} {r} asked, the cluster has {capacity.get(r)}"
            for r in sorted(want) if want[r] > capacity.get(r)]
    if over:
        return (R.PLACEMENT, f"PodGroup minResources can never be met: {', '.join(over)}; "
                "lower minResources or add nodes")
    queue = queues.get(gang.queue)
    if queue is None or queue.name in parents:
        return None  # the reason about the queue comes once the members exist
    idle = QuotaLedger.empty(tree)
    pools = tree.pools_of(queue.name)
    most: dict[str, int] = {}
    for pool in pools:
        for r, v in idle.available(queue.name, pool).items():
            most[r] = most.get(r, 0) + v
    over = [f"{want[r]} {r} asked, at most {most[r]} ever available"
            for r in sorted(want) if r in most and want[r] > most[r]]
    if not over:
        return None
    return (R.QUOTA, f"PodGroup minResources can never be admitted to queue {queue.name}, "
            f"even with every queue idle ({', '.join(over)} across pools {', '.join(pools)}): "
            "raise the queue's quota or borrowing limit, or lower minResources")
