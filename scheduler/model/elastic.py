"""Elastic gangs: a running gang that may run with fewer members than it has, down to its
minimum (``RunningGang.min_member``), grows and shrinks as whole decisions of the core.

Why here, in the model: growing (members of a running gang bound later) and shrinking (a
partial ``Release`` of the members above the minimum) both change one running gang's
members, and the snapshot, the cycle's draft and the simulator must agree on what the gang
is afterwards. One place says how members are added (``grown``) and taken (``shrunk``), and
which members go first (``surplus``: the highest ranks, so rank 0, the coordinator of
PyTorch elastic and Horovod, stays).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from scheduler.model.gangs import Gang, PodRef, Role, RunningGang
from scheduler.model.resources import Resources, total


def rank_key(pod: PodRef) -> tuple[object, ...]:
    """Natural order of pod names (``w-2`` before ``w-10``): a Job's completion index or a
    worker's rank is the number in its name."""
    return tuple(int(part) if part.isdigit() else part
                 for part in re.split(r"(\d+)", pod.name))


def surplus(running: RunningGang) -> tuple[PodRef, ...]:
    """The members a shrink may release, first to go first: those above the gang's minimum,
    highest rank first. Empty for a gang that is not elastic or has no member to spare (or
    whose members' nodes are not known: it could not say what a release frees)."""
    minimum = running.min_member
    if minimum is None or not running.pod_nodes:
        return ()
    pods = sorted((p for p, _ in running.pod_nodes), key=rank_key, reverse=True)
    return tuple(pods[:max(0, len(pods) - minimum)])


def draining(running: RunningGang) -> tuple[PodRef, ...] | None:
    """The members a terminating elastic gang is losing, when that is not all of them (a
    shrink under way: the rest runs on); None: it goes whole."""
    leaving = running.leaving
    if running.min_member is None or not leaving or len(leaving) >= len(running.pod_nodes):
        return None
    return tuple(p for p, _ in running.pod_nodes if p in leaving)


def _role_of(running: RunningGang) -> dict[PodRef, Role]:
    return {p: r for r in running.gang.roles for p in r.pods}


def _allocations(running: RunningGang, pod_nodes: Iterable[tuple[PodRef, str]]
                 ) -> tuple[tuple[tuple[str, Resources], ...], tuple[tuple[str, str, int], ...]]:
    """(node, requests) and (role, node, pods) of *pod_nodes*, members of *running*."""
    role_of = _role_of(running)
    per_node: dict[str, list[Resources]] = defaultdict(list)
    members: dict[tuple[str, str], int] = defaultdict(int)
    for pod, node in pod_nodes:
        role = role_of[pod]
        per_node[node].append(role.requests)
        members[(role.name, node)] += 1
    return (tuple((n, total(res)) for n, res in sorted(per_node.items())),
            tuple((r, n, c) for (r, n), c in sorted(members.items())))


def part_of(running: RunningGang, pods: frozenset[PodRef]) -> RunningGang:
    """The members *pods* of *running* as a running gang of their own: what releasing them
    frees and gives back to quota (``Release`` of a part)."""
    if not running.pod_nodes:
        raise ValueError(f"gang {running.id}: which member runs where is not known")
    chosen = tuple((p, n) for p, n in running.pod_nodes if p in pods)
    allocations, members = _allocations(running, chosen)
    roles = tuple(replace(r, count=len(kept), min_count=len(kept), pods=kept)
                  for r in running.gang.roles
                  if (kept := tuple(p for p in r.pods if p in pods)))
    return replace(running, gang=replace(running.gang, roles=roles), allocations=allocations,
                   members=members, pod_nodes=chosen, min_member=None, shortfall=None,
                   leaving=running.leaving & pods)


def shrunk(running: RunningGang, pods: frozenset[PodRef]) -> RunningGang:
    """*running* without the members *pods* (a partial release carried out)."""
    left = frozenset(p for p, _ in running.pod_nodes) - pods
    rest = part_of(running, left)
    return replace(rest, min_member=running.min_member, shortfall=running.shortfall,
                   terminating=bool(rest.leaving))


def grown(running: RunningGang, added: RunningGang) -> RunningGang:
    """*running* with the members of *added* (bound to it now) joined: roles side by side
    (renamed where a name is taken), allocations summed per node."""
    taken = {r.name for r in running.gang.roles}
    renamed: dict[str, str] = {}
    roles = list(running.gang.roles)
    for role in added.gang.roles:
        name = role.name
        while name in taken:
            name = f"{name}+"
        taken.add(name)
        renamed[role.name] = name
        roles.append(replace(role, name=name, min_count=role.count))
    per_node: dict[str, list[Resources]] = defaultdict(list)
    for node, res in (*running.allocations, *added.allocations):
        per_node[node].append(res)
    members = sorted((*running.members,
                      *((renamed[r], n, c) for r, n, c in added.members)))
    return replace(running, gang=replace(running.gang, roles=tuple(roles)),
                   allocations=tuple((n, total(res)) for n, res in sorted(per_node.items())),
                   members=tuple(members),
                   pod_nodes=tuple(sorted((*running.pod_nodes, *added.pod_nodes),
                                          key=lambda pn: rank_key(pn[0]))))


def describe_growth(gang: Gang, placed: int, growing: bool) -> str:
    """What a bind of *gang* (*placed* of its pods) does with its optional members:
    "growing: 2 of 4 optional members placed" for members bound to a running gang,
    "started with 2 of 4 optional members (minimum 4)" for an elastic gang that starts;
    "" when it has none."""
    optional = gang.size - gang.min_member
    if optional <= 0:
        return ""
    extra = max(0, placed - gang.min_member)
    if growing:
        rest = ("" if extra == optional else
                "; the rest start as room appears (an elastic gang never displaces anyone "
                "to grow)")
        return f"growing: {extra} of {optional} optional members placed{rest}"
    return f"started with {extra} of {optional} optional members (minimum {gang.min_member})"
