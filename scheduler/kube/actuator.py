"""Carry out a ``CyclePlan`` on a real cluster: evict, nominate, bind, roll back, explain.

Everything comes from the plan: the pods to bind (and where), the victims' pods, the
preemptors' pods and their nodes, the pods of every pending, unformed or given-up gang and
whether it has a PodGroup, the partly bound gangs to roll back. The cluster cache is never
read here.

Binding is on the critical path and happens inside ``apply`` (every gang atomically, all
gangs of the plan concurrently). Everything a person reads (pod conditions, PodGroup status,
events) is handed to a background writer that keeps only the latest desired state per
object, so ten thousand pending pods never slow a bind, and a reason that did not change is
never rewritten. A bound PodGroup's status follows its pods (``group_sync``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import partial

import structlog

from scheduler.kube.binder import Binder
from scheduler.kube.client import KubeClient
from scheduler.kube.events import EventReason, EventRecorder, EventType, ObjectRef
from scheduler.kube.evictor import Evictor
from scheduler.kube.status import PodGroupPhase, PodGroupStatus, StatusWriter
from scheduler.kube.writer import BackgroundWriter, Task
from scheduler.loop import ApplyResult
from scheduler.metrics import SchedulerMetrics
from scheduler.model import PodRef
from scheduler.plan import CyclePlan, Members

log = structlog.get_logger("gang_scheduler.actuator")


@dataclass(frozen=True, slots=True)
class ActuatorConfig:
    scheduler_name: str = "gang-scheduler"
    eviction_grace_period_seconds: int = 30


class KubeActuator:
    """The live scheduler's ``Actuator``."""

    def __init__(self, client: KubeClient, binder: Binder, statuses: StatusWriter,
                 events: EventRecorder, config: ActuatorConfig = ActuatorConfig(),
                 metrics: SchedulerMetrics | None = None) -> None:
        self.client, self.binder = client, binder
        self.statuses, self.events, self.config, self.metrics = statuses, events, config, metrics
        self.writer = BackgroundWriter()
        self.evictor = Evictor(binder, events, self.writer, config.eviction_grace_period_seconds)
        # Pods handed to the binder, with how many writer tasks had been taken up then. A
        # pending explanation or a nomination decided earlier must never land on them
        # (PodScheduled=False on a bound pod is a lie, and a kubelet may re-admit the pod on
        # that update; the apiserver refuses nominatedNodeName on a bound pod): their queued
        # writes are dropped at the bind, and one already running skips them; once the
        # writer has finished that many tasks, none can be left.
        self._explain_lock = threading.Lock()
        self._binding: dict[str, int] = {}

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        evictions = self.evictor.evict(plan, now)
        self._nominate(plan)
        bound, failed = self._bind(plan)
        self._roll_back(plan)
        self._explain(plan)
        return ApplyResult(bound=tuple(bound), failed=failed, evicted=evictions.evicted,
                           blocked=evictions.blocked)

    # Preemption ---------------------------------------------------------------------------
    def _nominate(self, plan: CyclePlan) -> None:
        """``nominatedNodeName`` on each preemptor pod: where it will go once victims leave."""
        for nom in plan.nominations:
            for ref, node in nom.pod_nodes:
                self.writer.submit(f"nominate/{ref.uid}", partial(self._nominate_pod, ref, node))

    def _nominate_pod(self, ref: PodRef, node: str) -> None:
        """The background write of one nomination, unless the pod was handed to the binder
        since (the apiserver refuses nominatedNodeName on a bound pod with HTTP 422, and a
        preemptor is bound the cycle after its victims are gone, often before this runs)."""
        with self._explain_lock:
            if ref.uid in self._binding:
                return
            self.statuses.set_nominated_node(ref, node)

    # Binding --------------------------------------------------------------------------------
    def _bind(self, plan: CyclePlan) -> tuple[list[str], dict[str, str]]:
        if not plan.binds:
            return [], {}
        started, finished = self.writer.started, self.writer.finished
        with self._explain_lock:
            self._binding = {u: n for u, n in self._binding.items() if n > finished}
            for b in plan.binds:
                self.writer.cancel(f"pending/{b.gang_id}")
                for ref, _ in b.pod_nodes:
                    self.writer.cancel(f"nominate/{ref.uid}")
                    self._binding[ref.uid] = started
        outcomes = self.binder.bind_gangs([(b.gang_id, b.pod_nodes) for b in plan.binds],
                                          self.config.scheduler_name)
        with self._explain_lock:
            for b, out in zip(plan.binds, outcomes, strict=True):
                if not out.ok:
                    for ref, _ in b.pod_nodes:
                        self._binding.pop(ref.uid, None)
        bound: list[str] = []
        failed: dict[str, str] = {}
        for b, out in zip(plan.binds, outcomes, strict=True):
            ns, name = b.gang_id.split("/", 1)
            members = Members(tuple(ref for ref, _ in b.pod_nodes), b.group_uid)
            if out.ok:
                bound.append(b.gang_id)
                nodes = sorted({node for _, node in b.pod_nodes})
                message = (f"gang {b.gang_id} ({len(b.pod_nodes)} pods, queue {b.queue}) bound "
                           f"to {len(nodes)} nodes: {', '.join(nodes[:8])}"
                           f"{' ...' if len(nodes) > 8 else ''}")
                for ref, _ in b.pod_nodes:
                    self.statuses.forget_pod(ref.uid)
                self.writer.submit(f"event/{b.gang_id}/scheduled", partial(
                    self._emit_gang, ns, name, members, EventReason.SCHEDULED, message,
                    EventType.NORMAL))
                if self.metrics is not None:
                    self.metrics.pods_bound.inc(len(b.pod_nodes))
            else:
                why = out.describe()
                failed[b.gang_id] = why
                log.warning("gang_bind_failed", gang=b.gang_id, namespace=ns, queue=b.queue,
                            reason=why)
                self.writer.submit(f"event/{b.gang_id}/rollback", partial(
                    self._emit_gang, ns, name, members, EventReason.GANG_ROLLED_BACK,
                    f"gang rolled back: {why}", EventType.WARNING))
        return bound, failed

    def _roll_back(self, plan: CyclePlan) -> None:
        """Delete the bound members of partly bound gangs the plan gives up completing."""
        for r in plan.rollbacks:
            keys = self.binder.gang_keys(r.gang_id)
            log.warning("partial_gang_rolled_back", **keys, bound=len(r.pods), reason=r.reason,
                        takeover=r.takeover)
            for f in self.binder.delete_pods(list(r.pods), gang=r.gang_id):
                log.error("rollback_failed", **keys, pod=str(f.pod), reason=f.reason)

    def _emit_gang(self, ns: str, name: str, members: Members, reason: str, message: str,
                   type_: EventType) -> None:
        """An event on the gang's PodGroup, else on its first pod."""
        if members.group_uid is not None:
            self.events.emit(ObjectRef.podgroup(ns, name, members.group_uid), reason, message,
                             type_)
        elif members.pods:
            self.events.emit(ObjectRef.pod(members.pods[0]), reason, message, type_)

    # Explaining -------------------------------------------------------------------------------
    def _explain(self, plan: CyclePlan) -> None:
        """The reason of every pending gang, of groups of pods that are not gangs yet, and
        the terminal status of gangs given up, on their pods (and PodGroups)."""
        for gang_id, reason in plan.pending.items():
            members = plan.members.get(gang_id, Members())
            self.writer.submit(f"pending/{gang_id}", self._reason_task(
                gang_id, members, str(reason), PodGroupStatus(
                    PodGroupPhase.PENDING, reason="Unschedulable", message=str(reason))))
        for u in plan.unformed:
            self.writer.submit(f"pending/{u.gang_id}", self._reason_task(
                u.gang_id, u.members, str(u.reason), None))
        for g in plan.give_ups:
            self.writer.submit(f"pending/{g.gang_id}", self._reason_task(
                g.gang_id, g.members, f"ScheduleTimeout: {g.message}", PodGroupStatus(
                    PodGroupPhase.FAILED, reason="ScheduleTimeout", message=g.message)))

    def _reason_task(self, gang_id: str, members: Members, text: str,
                     status: PodGroupStatus | None) -> Task:
        ns, name = gang_id.split("/", 1)

        def task() -> None:
            written = []
            for ref in members.pods:
                with self._explain_lock:
                    if ref.uid in self._binding:
                        continue  # bound since this reason was decided
                    self.statuses.set_unschedulable(ref, text)
                written.append(ref)
            if members.pods and not written:
                return
            if status is not None and members.group_uid is not None:
                self.statuses.set_podgroup_status(ns, name, status)
            self._emit_gang(ns, name, Members(tuple(written), members.group_uid),
                            EventReason.FAILED_SCHEDULING, text, EventType.WARNING)
        return task

    def close(self) -> None:
        self.writer.flush()
        self.writer.stop()
