"""Elastic shrink: a preemptor takes members above running gangs' minimum before anyone loses
a whole gang.

The victim search (``policies.victims``) is run first over partial releases only: each
elastic gang that may be preempted offers the members above its minimum, highest rank first
(``scheduler.model.elastic.surplus``). A proven set is then trimmed to as few members per
gang as still let the applicant start. Only when no such set exists does the usual search
over whole gangs run (``scheduler.decide.trial``). A release never takes a member of the
minimum, so a shrink never leaves a gang below it.
"""

from __future__ import annotations

from dataclasses import replace

from policies.fit import Applicant, World
from policies.preemption import Candidate
from policies.queues import QueueSet
from policies.victims import Preemption, Room, VictimSearch, select_victims
from scheduler.model.elastic import rank_key, surplus
from scheduler.model.release import Release
from scheduler.placement.types import Question


def shrink_candidates(found: list[Candidate], now: float) -> list[Candidate]:
    """Of *found* (whole-gang candidates), the elastic gangs with members above their
    minimum, each offering all of those members."""
    out = []
    for c in found:
        spare = surplus(c.running)
        if spare:
            release = Release.of_pods(c.running, spare)
            out.append(replace(c, release=release, cost=release.work_at_risk(now)))
    return out


def shrink_victims(applicant: Applicant, world: World, found: list[Candidate], room: Room,
                   queues: QueueSet, now: float) -> Preemption | None:
    """The cheapest proven set of partial releases (members above the minimum) that lets
    the applicant start, each trimmed to as few members as still suffice; None if members
    above the minimum cannot make room."""
    partial = shrink_candidates(found, now)
    if not partial:
        return None
    proof = select_victims(applicant, world, partial, room, queues)
    if proof is None:
        return None
    if world.params.question is not Question.WHETHER:
        world = replace(world, params=world.params.asking(Question.WHETHER))
    search = VictimSearch(applicant, world, queues, list(proof.victims), room)
    for victim in proof.victims:
        proof = _fewest(search, proof, victim, now)
    return proof


def _fewest(search: VictimSearch, proof: Preemption, victim: Candidate,
            now: float) -> Preemption:
    """*proof* with *victim*'s release cut to the fewest of its members (highest rank first)
    that still prove: a binary search over how many."""
    pods = sorted(victim.release.pods, key=rank_key, reverse=True)
    low, high = 1, len(pods)  # high members are known to suffice
    best = proof
    while low < high:
        mid = (low + high) // 2
        release = victim.release.only(pods[:mid])
        fewer = replace(victim, release=release, cost=release.work_at_risk(now))
        chosen = [fewer if v.id == victim.id else v for v in best.victims]
        found = search.prove(chosen)
        if found is None:
            low = mid + 1
        else:
            high, best = mid, found
    return best
