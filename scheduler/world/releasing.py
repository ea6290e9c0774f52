"""What taking running gangs, or some of their members, out of a snapshot gives back: the
nodes' free resources and the devices their pods' claims held.

Why one place: a whole-gang release (preemption, a gang that will have ended) and a partial
one (an elastic shrink, ``scheduler.model.elastic.shrunk``) must free the same things for
the members they take, so that the same cycle's victim search and placement see a shrink's
devices free exactly as a whole gang's. The partial path once kept the members' device
claims allocated, so a shrink never proved for a preemptor that needed devices and the
victim search took whole gangs instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from scheduler.model import RunningGang
from scheduler.model.release import Release
from scheduler.model.resources import Resources
from scheduler.model.volumes import VolumeCatalog


def merged(releases: Iterable[Release]) -> tuple[Release, ...]:
    """One release per gang, in first-seen order: a whole one wins; parts of one gang are
    joined, and parts that name every member are the whole gang (an estimate counts a
    draining gang's leaving members now and the rest at its end)."""
    by_id: dict[str, Release] = {}
    for r in releases:
        known = by_id.get(r.id)
        if known is None or r.part is None:
            by_id[r.id] = r
        elif known.part is not None:
            by_id[r.id] = Release.of_pods(known.running, known.part | r.part)
    return tuple(by_id.values())


def free_after(free: Mapping[str, Resources], gangs: Iterable[RunningGang]
               ) -> dict[str, Resources]:
    """Node -> its free resources once *gangs* are gone (only the nodes that change; nodes
    *free* does not know are ignored)."""
    changed: dict[str, Resources] = {}
    for rg in gangs:
        for name, res in rg.allocations:
            now = changed[name] if name in changed else free.get(name)
            if now is not None:
                changed[name] = now + res
    return changed


def leaving_uids(gangs: Iterable[RunningGang]) -> list[str]:
    """The uids whose device claims go with these whole gangs: their pods', and their
    PodGroup's (a group claim is reserved for the group, ``native``)."""
    gangs = tuple(gangs)
    return [*(p.uid for rg in gangs for p in rg.gang.pods),
            *(rg.gang.native.uid for rg in gangs if rg.gang.native is not None)]


def partial_uids(releases: Iterable[Release]) -> list[str]:
    """The uids whose device claims a partial release frees: the released members' own.
    The gang runs on, so a claim it holds as a group (its PodGroup's) stays."""
    return [p.uid for r in releases if not r.is_whole for p in r.pods]


def claims_released(volumes: VolumeCatalog, uids: Iterable[str]) -> VolumeCatalog:
    """*volumes* once the pods (and groups) of *uids* are gone: they leave their claims'
    reservations, and a claim no one uses any more holds no device
    (``DeviceInventory.released``). Itself if nothing changes."""
    devices = volumes.devices
    if not devices.claims:
        return volumes
    freed = devices.released(uids)
    return volumes if freed is devices else replace(volumes, devices=freed)
