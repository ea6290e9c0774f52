"""PodGroup status from its pods: ``Scheduled`` -> ``Running`` -> ``Finished`` (or ``Failed``).

Like the coscheduling plugin's PodGroup controller, this follows the pods, not the plan: after
every cycle (the binds assumed in the cache) each PodGroup with a member bound or finished
gets the phase and counts its pods imply. It is the one place that writes a bound PodGroup's
status, so a bind and the sync never write it twice with briefly different counts. A status
equal to the one queued or last written is not submitted again, so a sync costs no API
traffic when nothing moved. A failed write is not recorded, so the next sync retries it.

Pods being deleted (evicted, preempted) no longer count: a preempted gang is not "Running 5"
while its pods terminate. A PodGroup last reported scheduled or running with no member bound
any more (its pods preempted, evicted or deleted) goes back to ``Pending`` at once, before
the next plan gives it a reason: a status is never left saying more than the pods do.

Pending PodGroups are otherwise the plan's: the actuator writes their reason.

A ``scheduling.k8s.io`` PodGroup that is not its pods' gang follows its pods too: on 1.36 the
Job controller gives every Indexed Job of a JobSet (or a TrainJob) its own PodGroup, while the
gang is the JobSet's. Once all its pods are bound with their gang, its scheduling condition
turns True as kube-scheduler writes it (``native_status``); never False again.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace
from functools import partial

from scheduler.feed.cache import ClusterCache
from scheduler.kube.write.evictor import Submitter
from scheduler.kube.write.native_status import NativeStatusWriter
from scheduler.kube.write.status import PodGroupPhase, PodGroupStatus, StatusWriter
from scheduler.model import RunningGang
from scheduler.model.native import NativeGroupInfo
from scheduler.model.shortfall import Shortfall
from scheduler.model.workloads import PodInfo, PodPhase

#: Phases that say members are on nodes: wrong once none is.
_PLACED = (PodGroupPhase.SCHEDULED, PodGroupPhase.RUNNING)


def group_status(min_member: int, pods: list[PodInfo],
                 shortfall: Shortfall | None = None) -> PodGroupStatus | None:
    """The PodGroup status its pods imply (those being deleted left out), or None while none
    is bound (pending: the plan's reason says why); a running gang's *shortfall* (members
    lost) is its condition's reason."""
    pods = [p for p in pods if not p.terminating]
    scheduled = sum(1 for p in pods if p.node_name)
    running = sum(1 for p in pods if p.phase is PodPhase.RUNNING)
    succeeded = sum(1 for p in pods if p.phase is PodPhase.SUCCEEDED)
    failed = sum(1 for p in pods if p.phase is PodPhase.FAILED)
    if not scheduled:
        return None
    started = min((p.started_at for p in pods if p.started_at is not None), default=None)
    if failed and running + succeeded < min_member:
        phase, reason = PodGroupPhase.FAILED, "MembersFailed"
        message = f"{failed} member(s) failed; {running} running, {succeeded} succeeded"
    elif succeeded >= min_member and not running:
        phase, reason, message = PodGroupPhase.FINISHED, "Finished", f"{succeeded} succeeded"
    elif running + succeeded >= min_member:
        phase, reason, message = PodGroupPhase.RUNNING, "Running", f"{running} running"
    else:
        phase, reason = PodGroupPhase.SCHEDULED, "Scheduled"
        message = f"{scheduled} bound, {running} running"
    if shortfall is not None and phase is not PodGroupPhase.FAILED:
        reason, message = "BelowMinimum", shortfall.describe()
    return PodGroupStatus(phase, scheduled=scheduled, running=running, succeeded=succeeded,
                          failed=failed, schedule_start_time=started, reason=reason,
                          message=message)


def unplaced(pods: list[PodInfo]) -> PodGroupStatus:
    """The status of a PodGroup that was placed and has no member bound any more."""
    leaving = sum(1 for p in pods if p.terminating)
    why = f"{leaving} terminating, " if leaving else ""
    return PodGroupStatus(PodGroupPhase.PENDING, reason="MembersGone",
                          message=f"no member is bound any more ({why}{len(pods) - leaving} "
                                  "left): preempted, evicted or deleted; pending again")


class GroupStatusSync:
    """Writes the status of bound PodGroups through *writer* (the actuator's)."""

    def __init__(self, cache: ClusterCache, statuses: StatusWriter, writer: Submitter,
                 native: NativeStatusWriter | None = None) -> None:
        self.cache, self.statuses, self.writer, self.native = cache, statuses, writer, native
        self._lock = threading.Lock()
        self._queued: dict[str, PodGroupStatus] = {}  # submitted, not yet run, by ns/name

    def sync(self, running: Mapping[str, RunningGang] | None = None) -> None:
        """Phase and counts of every PodGroup with a member bound or finished; *running*:
        the cycle's running gangs, whose shortfalls become the condition."""
        for group in self.cache.groups():
            gang = (running or {}).get(group.key)
            pods = self.cache.gang_pods(group.key, assumed=True)
            status = group_status(group.min_member, pods,
                                  gang.shortfall if gang is not None else None)
            known = self._known(group.namespace, group.name)
            if status is None:
                if known is None or known.phase not in _PLACED:
                    continue
                status = unplaced(pods)
            if known is not None and known.schedule_start_time is not None:
                # Set once, at the first bind: the watch later reports the members' own start
                # times, which would otherwise move it (and cost a write) for nothing.
                status = replace(status, schedule_start_time=known.schedule_start_time)
            if status != known:
                self._submit(group.namespace, group.name, status)
        if self.native is not None:
            self._sync_member_groups(running or {})

    def _sync_member_groups(self, running: Mapping[str, RunningGang]) -> None:
        """Scheduled, the native PodGroups a running gang's pods name besides its own, once
        all their pods are bound."""
        for gid, gang in running.items():
            if gang.gang.native is not None:
                continue  # the gang is its pods' own PodGroup: the bind wrote its condition
            pods = self.cache.gang_pods(gid, assumed=True)
            for name in sorted({p.pod_group_name for p in pods if p.pod_group_name}):
                group = self.cache.native_group(f"{gang.gang.namespace}/{name}")
                if group is None or group.scheduled or group.key == gid:
                    continue
                members = [p for p in pods if p.pod_group_name == name and not p.terminating]
                if members and all(p.node_name for p in members):
                    message = (f"its {len(members)} pods are bound with gang {gid} "
                               f"({len(gang.gang.pods)} pods)")
                    self.writer.submit(f"native/{group.key}",
                                       partial(self._scheduled, group, message))

    def _scheduled(self, group: NativeGroupInfo, message: str) -> None:
        if self.native is not None:
            self.native.scheduled(group, message)

    def _known(self, ns: str, name: str) -> PodGroupStatus | None:
        """The status queued for the PodGroup, else the one last written."""
        with self._lock:
            queued = self._queued.get(f"{ns}/{name}")
        return queued if queued is not None else self.statuses.podgroup_status(ns, name)

    def _submit(self, ns: str, name: str, status: PodGroupStatus) -> None:
        key = f"{ns}/{name}"
        with self._lock:
            self._queued[key] = status

        def task() -> None:
            with self._lock:  # dequeued: from now on the writer's cache is the record
                if self._queued.get(key) is status:
                    del self._queued[key]
            if self.cache.group(key) is not None:
                self.statuses.set_podgroup_status(ns, name, status)
        self.writer.submit(f"group/{key}", task)
