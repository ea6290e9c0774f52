"""Carry out a ``CyclePlan`` on a real cluster: evict, nominate, bind, explain.

Binding is on the critical path and happens inside ``apply`` (every gang atomically, all
gangs of the plan concurrently). Everything a person reads — pod conditions, PodGroup status,
events — is handed to a background writer that keeps only the latest desired state per
object, so ten thousand pending pods never slow a bind, and a reason that did not change is
never rewritten.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

import structlog

from scheduler.cache import ClusterCache
from scheduler.kube.binder import Binder
from scheduler.kube.claims import ClaimWriter
from scheduler.kube.client import KubeClient
from scheduler.kube.events import EventReason, EventRecorder, EventType, ObjectRef
from scheduler.kube.evictor import Evictor
from scheduler.kube.native_status import SCHEDULER_ERROR, NativeStatusWriter
from scheduler.kube.status import PodGroupPhase, PodGroupStatus, StatusWriter
from scheduler.loop import ApplyResult
from scheduler.metrics import SchedulerMetrics
from scheduler.model import PodRef
from scheduler.model.volumes import ClaimDecision
from scheduler.model.workloads import PodInfo, PodPhase
from scheduler.plan import CyclePlan, PendingReason, ReasonCategory, map_pods

log = structlog.get_logger("gang_scheduler.actuator")

Task = Callable[[], object]  # the result, if any, is ignored


class BackgroundWriter:
    """A single thread running the latest write task per key (older ones are dropped)."""

    def __init__(self, name: str = "status-writer") -> None:
        self._latest: dict[str, Task] = {}
        self._lock = threading.Lock()
        self._wake: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, key: str, task: Task) -> None:
        with self._lock:
            fresh = key not in self._latest
            self._latest[key] = task
        if fresh:
            self._wake.put(key)

    def _run(self) -> None:
        while True:
            key = self._wake.get()
            if key is None:
                return
            with self._lock:
                task = self._latest.pop(key, None)
            if task is None:
                continue
            try:
                task()
            except Exception as exc:  # a failed status write must never stop the writer
                log.warning("status_write_failed", key=key, error=str(exc))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every submitted task ran (for tests and shutdown)."""
        done = threading.Event()
        self.submit(f"__flush__{id(done)}", done.set)
        return done.wait(timeout)

    def stop(self) -> None:
        self._wake.put(None)


@dataclass(frozen=True, slots=True)
class ActuatorConfig:
    scheduler_name: str = "gang-scheduler"
    eviction_grace_period_seconds: int = 300


def group_status(min_member: int, pods: list[PodInfo]) -> PodGroupStatus | None:
    """The PodGroup status its pods imply, or None while nothing was ever bound (pending)."""
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
    return PodGroupStatus(phase, scheduled=scheduled, running=running, succeeded=succeeded,
                          failed=failed, schedule_start_time=started, reason=reason,
                          message=message)


class KubeActuator:
    """The live scheduler's ``Actuator``."""

    def __init__(self, client: KubeClient, cache: ClusterCache, binder: Binder,
                 statuses: StatusWriter, events: EventRecorder,
                 config: ActuatorConfig = ActuatorConfig(),
                 metrics: SchedulerMetrics | None = None,
                 native_statuses: NativeStatusWriter | None = None) -> None:
        self.client, self.cache, self.binder = client, cache, binder
        self.statuses, self.events, self.config, self.metrics = statuses, events, config, metrics
        # Kubernetes' own PodGroups (scheduling.k8s.io): the condition kube-scheduler writes.
        self.native_statuses = native_statuses or NativeStatusWriter(statuses.client)
        self.writer = BackgroundWriter()
        self.evictor = Evictor(cache, binder, events, self.writer,
                               config.eviction_grace_period_seconds)
        self.claims = ClaimWriter(binder.client)
        # Pods handed to the binder and not yet seen bound by the watch. A pending explanation
        # decided a cycle earlier must never land on them: PodScheduled=False on a bound pod
        # is a lie, and a kubelet may re-admit the pod on that update. The lock makes a
        # status write in flight finish before the binds start.
        self._explain_lock = threading.Lock()
        self._binding: set[str] = set()
        # PodGroup statuses submitted to the writer and not yet run, by ns/name.
        self._groups_lock = threading.Lock()
        self._groups_queued: dict[str, PodGroupStatus] = {}

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        evictions = self.evictor.evict(plan, now)
        self._mark_native_victims(plan, evictions.evicted)
        self._nominate(plan, now)
        claims: list[ClaimDecision] = []
        for prov in plan.provisions:
            claims += self.claims.apply(prov.claims, prov.gang_id).done
        bound, failed = self._bind(plan, now, claims)
        self._explain_pending(plan, now)
        self._explain_problems(now)
        return ApplyResult(bound=tuple(bound), failed=failed, evicted=evictions.evicted,
                           blocked=evictions.blocked, claims=tuple(claims))

    # Preemption ---------------------------------------------------------------------------
    def _mark_native_victims(self, plan: CyclePlan, evicted: Sequence[str]) -> None:
        """``DisruptionTarget`` on each evicted ``scheduling.k8s.io`` PodGroup (its pods
        got theirs from the evictor)."""
        for entry in plan.evictions:
            group = self.cache.native_group(entry.victim)
            if group is not None and entry.victim in evicted:
                message = f"preempted by gang {entry.preemptor}: {entry.message}"
                self.writer.submit(f"disrupted/{entry.victim}", partial(
                    self.native_statuses.disrupted, group, message))

    def _nominate(self, plan: CyclePlan, now: float) -> None:
        """``nominatedNodeName`` on each preemptor pod: where it will go once victims leave."""
        if not plan.nominations:
            return
        pending = {g.id: g for g in self.cache.cycle_input(now).gangs.pending}
        for nom in plan.nominations:
            gang = pending.get(nom.gang_id)
            if gang is None or nom.placement is None:
                continue
            for ref, node in map_pods(gang, nom.placement):
                self.writer.submit(f"nominate/{ref.uid}", partial(self._nominate_pod, ref, node))

    def _nominate_pod(self, ref: PodRef, node: str) -> None:
        """The background write of one nomination, unless the pod was handed to the binder
        since (the apiserver refuses nominatedNodeName on a bound pod with HTTP 422, and a
        preemptor is bound the cycle after its victims are gone, often before this runs)."""
        with self._explain_lock:
            if ref.uid in self._binding or not self._unconfirmed(ref.uid):
                return
            self.statuses.set_nominated_node(ref, node)

    # Binding --------------------------------------------------------------------------------
    def _bind_claims(self, plan: CyclePlan) -> dict[str, str]:
        """Claim writes of each gang before any member binds: gang id -> why they failed."""
        failed = {}
        for b in plan.binds:
            if b.placement.claims:
                outcome = self.claims.apply(b.placement.claims, b.gang_id)
                if not outcome.ok:
                    failed[b.gang_id] = f"claims not bound: {outcome.failure}"
        return failed

    def _bind(self, plan: CyclePlan, now: float,
              claims: list[ClaimDecision]) -> tuple[list[str], dict[str, str]]:
        if not plan.binds:
            return [], {}
        claims_failed = self._bind_claims(plan)
        binds = [b for b in plan.binds if b.gang_id not in claims_failed]
        claimed = {ref.uid for b in binds for ref, _ in b.pod_nodes}
        with self._explain_lock:
            self._binding = {u for u in self._binding if self._unconfirmed(u)} | claimed
        outcomes = self.binder.bind_gangs([(b.gang_id, b.pod_nodes) for b in binds],
                                          self.config.scheduler_name)
        released = {ref.uid for b, out in zip(binds, outcomes, strict=True) if not out.ok
                    for ref, _ in b.pod_nodes}
        with self._explain_lock:
            self._binding -= released
        bound: list[str] = []
        failed: dict[str, str] = dict(claims_failed)
        for b, out in zip(binds, outcomes, strict=True):
            ns, name = b.gang_id.split("/", 1)
            if out.ok:
                claims += b.placement.claims
                bound.append(b.gang_id)
                nodes = sorted({node for _, node in b.pod_nodes})
                message = (f"gang {b.gang_id} ({len(b.pod_nodes)} pods, queue {b.queue}) bound "
                           f"to {len(nodes)} nodes: {', '.join(nodes[:8])}"
                           f"{' ...' if len(nodes) > 8 else ''}")
                for ref, _ in b.pod_nodes:
                    self.statuses.forget_pod(ref.uid)
                status = self._bound_status(b.gang_id, b.pod_nodes, now)
                if status is not None:
                    self._submit_group_status(ns, name, status)
                native = self.cache.native_group(b.gang_id)
                if native is not None:
                    self.writer.submit(f"pending/{b.gang_id}", partial(
                        self.native_statuses.scheduled, native, message))
                first = b.pod_nodes[0][0] if b.pod_nodes else None
                self.writer.submit(f"event/{b.gang_id}/scheduled", partial(
                    self._emit_gang, ns, name, first, EventReason.SCHEDULED, message,
                    EventType.NORMAL))
                if self.metrics is not None:
                    self.metrics.pods_bound.inc(len(b.pod_nodes))
            else:
                why = out.describe()
                failed[b.gang_id] = why
                self.claims.undo(b.placement.claims, b.gang_id)
                log.warning("gang_bind_failed", gang=b.gang_id, namespace=ns, queue=b.queue,
                            reason=why)
                first = b.pod_nodes[0][0] if b.pod_nodes else None
                self.writer.submit(f"event/{b.gang_id}/rollback", partial(
                    self._emit_gang, ns, name, first, EventReason.GANG_ROLLED_BACK,
                    f"gang rolled back: {why}", EventType.WARNING))
        return bound, failed

    def _emit_gang(self, ns: str, name: str, first: PodRef | None, reason: str, message: str,
                   type_: EventType) -> None:
        native = self.cache.native_group(f"{ns}/{name}")
        group = self.cache.group(f"{ns}/{name}")
        if native is not None:
            self.events.emit(ObjectRef("PodGroup", ns, name, native.uid, native.api_version),
                             reason, message, type_)
        elif group is not None:
            self.events.emit(ObjectRef.podgroup(ns, name, group.uid), reason, message, type_)
        elif first is not None:
            self.events.emit(ObjectRef.pod(first), reason, message, type_)

    # PodGroup status ---------------------------------------------------------------------
    # One rule (``group_status`` over the pods with assumed binds applied) decides the status
    # both at bind time and in the per-cycle sync, so a bind and the next sync agree and the
    # PodGroup is written once, not twice with briefly different counts.
    def _bound_status(self, gang_id: str, pod_nodes: Sequence[tuple[PodRef, str]],
                      now: float) -> PodGroupStatus | None:
        """The status the sync will compute once the loop assumes this bind (same ``now``)."""
        group = self.cache.group(gang_id)
        if group is None:
            return None
        nodes = {ref.uid: node for ref, node in pod_nodes}
        pods = [replace(p, node_name=nodes[p.uid], started_at=now)
                if p.uid in nodes and not p.node_name else p
                for p in self.cache.gang_pods(gang_id, assumed=True)]
        return group_status(group.min_member, pods)

    def _known_group_status(self, ns: str, name: str) -> PodGroupStatus | None:
        """The status queued for the PodGroup, else the one last written."""
        with self._groups_lock:
            queued = self._groups_queued.get(f"{ns}/{name}")
        return queued if queued is not None else self.statuses.podgroup_status(ns, name)

    def _submit_group_status(self, ns: str, name: str, status: PodGroupStatus) -> None:
        key = f"{ns}/{name}"
        with self._groups_lock:
            self._groups_queued[key] = status

        def task() -> None:
            with self._groups_lock:  # dequeued: from now on the writer's cache is the record
                if self._groups_queued.get(key) is status:
                    del self._groups_queued[key]
            if self.cache.group(key) is not None:
                self.statuses.set_podgroup_status(ns, name, status)
        self.writer.submit(f"group/{key}", task)

    # Explaining -------------------------------------------------------------------------------
    def _explain_pending(self, plan: CyclePlan, now: float) -> None:
        for gang_id, reason in plan.pending.items():
            self.writer.submit(f"pending/{gang_id}", self._pending_task(gang_id, reason, now))

    def _explain_problems(self, now: float) -> None:
        """Gangs that cannot even be formed (PodGroup missing, bad annotation) say so too."""
        for gang_id, problem in self.cache.cycle_input(now).gangs.problems.items():
            reason = PendingReason(ReasonCategory.WAITING_FOR_MEMBERS, problem)
            self.writer.submit(f"pending/{gang_id}",
                               self._pending_task(gang_id, reason, now, SCHEDULER_ERROR))

    def _pending_task(self, gang_id: str, reason: PendingReason, now: float,
                      native_reason: str = "Unschedulable") -> Task:
        ns, name = gang_id.split("/", 1)
        text = str(reason)

        def task() -> None:
            pods = [p for p in self.cache.gang_pods(gang_id) if not p.node_name]
            written = []
            for p in pods:
                with self._explain_lock:
                    if p.uid in self._binding:
                        continue  # bound since this reason was decided
                    self.statuses.set_unschedulable(PodRef(p.namespace, p.name, p.uid), text)
                written.append(p)
            if pods and not written:
                return
            pods = written
            group = self.cache.group(gang_id)
            native = self.cache.native_group(gang_id)
            if native is not None:
                self.native_statuses.unschedulable(native, text, native_reason)
            elif group is not None:
                self.statuses.set_podgroup_status(ns, name, PodGroupStatus(
                    PodGroupPhase.PENDING, reason="Unschedulable", message=text))
            first = PodRef(pods[0].namespace, pods[0].name, pods[0].uid) if pods else None
            self._emit_gang(ns, name, first, EventReason.FAILED_SCHEDULING, text,
                            EventType.WARNING)
        return task

    def _unconfirmed(self, uid: str) -> bool:
        pod = self.cache.pod(uid)
        return pod is not None and not pod.node_name

    def give_up(self, expired: dict[str, str]) -> None:
        """Terminal status for gangs past their scheduleTimeoutSeconds (written once)."""
        for gang_id, message in expired.items():
            self.writer.submit(f"pending/{gang_id}", self._give_up_task(gang_id, message))

    def _give_up_task(self, gang_id: str, message: str) -> Task:
        ns, name = gang_id.split("/", 1)
        text = f"ScheduleTimeout: {message}"

        def task() -> None:
            pods = [p for p in self.cache.gang_pods(gang_id) if not p.node_name]
            for p in pods:
                self.statuses.set_unschedulable(PodRef(p.namespace, p.name, p.uid), text)
            if self.cache.group(gang_id) is not None:
                self.statuses.set_podgroup_status(ns, name, PodGroupStatus(
                    PodGroupPhase.FAILED, reason="ScheduleTimeout", message=message))
            first = PodRef(pods[0].namespace, pods[0].name, pods[0].uid) if pods else None
            self._emit_gang(ns, name, first, EventReason.FAILED_SCHEDULING, text,
                            EventType.WARNING)
        return task

    # PodGroup lifecycle ----------------------------------------------------------------------
    def sync_group_statuses(self) -> None:
        """Phase and counts of every PodGroup with a member bound or finished.

        Pending groups are left to ``_explain_pending`` (it writes the reason); this keeps
        ``Scheduled`` moving on to ``Running`` and ``Finished`` (or ``Failed``) as the pods do,
        like the coscheduling plugin's PodGroup controller. A status equal to the one queued
        or last written is not submitted again, so calling this every cycle costs no API
        traffic when nothing moved, and none right after the bind that already wrote it. A
        failed write is not recorded, so the next cycle retries it.
        """
        for group in self.cache.groups():
            status = group_status(group.min_member,
                                  self.cache.gang_pods(group.key, assumed=True))
            if status is None:
                continue
            known = self._known_group_status(group.namespace, group.name)
            if known is not None and known.schedule_start_time is not None:
                # Set once, at the first bind: the watch later reports the members' own start
                # times, which would otherwise move it (and cost a write) for nothing.
                status = replace(status, schedule_start_time=known.schedule_start_time)
            if status != known:
                self._submit_group_status(group.namespace, group.name, status)

    def close(self) -> None:
        self.writer.flush()
        self.writer.stop()
