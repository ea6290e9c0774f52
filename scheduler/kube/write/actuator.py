"""Carry out a ``CyclePlan`` on a real cluster: evict, nominate, claim, bind, roll back,
explain.

Everything comes from the plan: the pods to bind (and where), the pre-bind decisions to
write first (a PV taken, a claim to provision: ``prebind``), the victims' pods, the
preemptors' pods and their nodes, the pods of every pending or unformed gang and its
PodGroup if it has one (a scheduler-plugins PodGroup's uid, or Kubernetes' own PodGroup,
whose conditions are written the way kube-scheduler writes them: ``native_status``), the
partly bound gangs to roll back (``rollback``). The cluster cache is never read here.

Binding is on the critical path and happens outside the cycle: ``apply`` hands the plan's
gangs to a binding stage and returns (their outcome is ``ApplyResult.binding``, taken in by
the loop when it lands: ``scheduler.run.inflight``), so the next cycle decides while they bind
(every gang atomically, all gangs of the plan concurrently, by the ``Binder``).
Everything a person reads (pod conditions, PodGroup status, events) is handed to a
background writer that keeps only the latest desired state per object, so ten thousand
pending pods never slow a bind, and a reason that did not change is never rewritten. A
bound PodGroup's status follows its pods (``group_sync``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial

import structlog

from scheduler.decide.plan import Bind, CyclePlan, Members
from scheduler.kube.client import KubeClient
from scheduler.kube.events import EventReason, EventRecorder, EventType, ObjectRef
from scheduler.kube.lead.fence import Fenced
from scheduler.kube.write.binder import Binder
from scheduler.kube.write.evictor import Evictor
from scheduler.kube.write.native_status import SCHEDULER_ERROR, UNSCHEDULABLE, NativeStatusWriter
from scheduler.kube.write.prebind import PreBindWriter
from scheduler.kube.write.provisioning import ScaleUpWriter, keep_from_scale_down
from scheduler.kube.write.rollback import Releaser
from scheduler.kube.write.status import PodGroupPhase, PodGroupStatus, StatusWriter
from scheduler.kube.write.writer import BackgroundWriter, Retry, Task
from scheduler.model import PodRef
from scheduler.model.prebind import PreBind
from scheduler.run.inflight import ApplyResult
from scheduler.run.metrics import SchedulerMetrics

log = structlog.get_logger("gang_scheduler.actuator")


#: Cycles whose binds may be on the wire at once.
BINDING_STAGES = 4


@dataclass(frozen=True, slots=True)
class ActuatorConfig:
    scheduler_name: str = "gang-scheduler"
    eviction_grace_period_seconds: int = 300


class KubeActuator:
    """The live scheduler's ``Actuator``."""

    def __init__(self, client: KubeClient, binder: Binder, statuses: StatusWriter,
                 events: EventRecorder, config: ActuatorConfig = ActuatorConfig(),
                 metrics: SchedulerMetrics | None = None,
                 native_statuses: NativeStatusWriter | None = None,
                 retry: Retry | None = None, scale_ups: ScaleUpWriter | None = None,
                 asked_before: Callable[[], Iterable[str]] = tuple) -> None:
        """*scale_ups*: writes the plan's ProvisioningRequests (none: the cluster's autoscaler
        is never asked); *asked_before*: the gangs whose requests the read side listed."""
        self.client, self.binder = client, binder
        self.scale_ups, self.asked_before = scale_ups, asked_before
        self.statuses, self.events, self.config, self.metrics = statuses, events, config, metrics
        # Kubernetes' own PodGroups (scheduling.k8s.io): the condition kube-scheduler writes.
        self.native_statuses = native_statuses or NativeStatusWriter(statuses.client)
        self.writer = BackgroundWriter(retry=retry)
        self.evictor = Evictor(binder, events, self.writer, config.eviction_grace_period_seconds)
        self.prebinds = PreBindWriter(binder.client)
        self.releaser = Releaser(binder, statuses, self._announce_rollback, metrics)
        # Pods handed to the binder, with how many writer tasks had been taken up then. A
        # pending explanation or a nomination decided earlier must never land on them
        # (PodScheduled=False on a bound pod is a lie, and a kubelet may re-admit the pod on
        # that update; the apiserver refuses nominatedNodeName on a bound pod): their queued
        # writes are dropped at the bind, and one already running skips them; once the
        # writer has finished that many tasks, none can be left.
        self._explain_lock = threading.Lock()
        self._binding: dict[str, int] = {}
        # The binding stage: each cycle's binds run here, a few cycles' at once (their
        # members share the binder's pool), so a cycle never waits for an earlier one's.
        self.stage = ThreadPoolExecutor(max_workers=BINDING_STAGES,
                                        thread_name_prefix="bind-stage")

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        evictions = self.evictor.evict(plan, now)
        self._mark_native_victims(plan, evictions.evicted)
        self._nominate(plan)
        prebinds: list[PreBind] = []
        retries = [self.evictor.retry_in()]
        for prov in plan.provisions:
            outcome = self.prebinds.apply(prov.prebinds, prov.gang_id)
            prebinds += outcome.done
            retries.append(None if outcome.ok or outcome.fenced else self.evictor.retry_seconds)
        binding = self._hand_off(plan.binds)
        retries.append(self.evictor.retry_seconds if self.releaser.roll_back(plan.rollbacks)
                       else None)
        self._explain(plan)
        if self.scale_ups is not None:  # in the background, the latest plan's only
            self.writer.submit("scale-ups", partial(self.scale_ups.apply, plan,
                                                    tuple(self.asked_before())))
        return ApplyResult(evicted=evictions.evicted, blocked=evictions.blocked,
                           prebinds=tuple(prebinds), binding=binding,
                           retry_in=min((r for r in retries if r is not None), default=None))

    # Preemption ---------------------------------------------------------------------------
    def _mark_native_victims(self, plan: CyclePlan, evicted: tuple[str, ...]) -> None:
        """``DisruptionTarget`` on each evicted ``scheduling.k8s.io`` PodGroup (its pods
        got theirs from the evictor)."""
        gone = set(evicted)
        for entry in plan.evictions:
            group = entry.native
            if group is not None and entry.victim in gone:
                message = entry.headline
                self.writer.submit(f"disrupted/{entry.victim}", partial(
                    self.native_statuses.disrupted, group, message))

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
    def _write_prebinds(self, binds: Sequence[Bind]) -> tuple[dict[str, str], list[str]]:
        """Pre-bind writes of each gang before any member binds: gang id -> why they failed,
        and the gangs of those the leader fence refused (not to be backed off)."""
        failed, fenced = {}, []
        for b in binds:
            if b.keep_from_scale_down:
                try:
                    why = keep_from_scale_down(self.binder.client, (r for r, _ in b.pod_nodes))
                except Fenced:  # not ours to write: the gang neither binds nor backs off
                    failed[b.gang_id] = "not leading: members not marked for scale-down"
                    fenced.append(b.gang_id)
                    continue
                if why:
                    failed[b.gang_id] = why
                    continue
            if b.placement.prebinds:
                outcome = self.prebinds.apply(b.placement.prebinds, b.gang_id)
                if not outcome.ok:
                    failed[b.gang_id] = f"claims not bound: {outcome.failure}"
                if outcome.fenced:
                    fenced.append(b.gang_id)
        return failed, fenced

    def _hand_off(self, binds: Sequence[Bind]) -> Future[ApplyResult] | None:
        """Hand *binds* to the binding stage, after making sure no explanation or nomination
        decided earlier lands on their pods (see ``__init__``); their outcome to come."""
        if not binds:
            return None
        started, finished = self.writer.started, self.writer.finished
        with self._explain_lock:
            self._binding = {u: n for u, n in self._binding.items() if n > finished}
            for b in binds:
                self.writer.cancel(f"pending/{b.gang_id}")
                for ref, _ in b.pod_nodes:
                    self.writer.cancel(f"nominate/{ref.uid}")
                    self._binding[ref.uid] = started
        return self.stage.submit(self._bind, tuple(binds))

    def _bind(self, handed: Sequence[Bind]) -> ApplyResult:
        """Bind gangs (pre-bind writes first), on the binding stage: the gangs bound with the
        pre-bind writes that stand, those that failed (why, and what of them is kept)."""
        prebinds_failed, prebinds_fenced = self._write_prebinds(handed)
        binds = [b for b in handed if b.gang_id not in prebinds_failed]
        outcomes = self.binder.bind_gangs([(b.gang_id, b.pod_nodes) for b in binds],
                                          self.config.scheduler_name)
        pairs = list(zip(binds, outcomes, strict=True))
        ok = {b.gang_id for b, out in pairs if out.ok}
        kept = {ref.uid for _, out in pairs if not out.ok for ref, _ in out.bound}
        with self._explain_lock:  # explanations may land on the pods not bound again
            for b in handed:
                if b.gang_id not in ok:
                    for ref, _ in b.pod_nodes:
                        if ref.uid not in kept:
                            self._binding.pop(ref.uid, None)
        bound: list[str] = []
        prebinds: list[PreBind] = []
        failed: dict[str, str] = dict(prebinds_failed)
        for b, out in pairs:
            if out.ok:
                prebinds += b.placement.prebinds
                bound.append(b.gang_id)
                self._bound(b)
                continue
            why = out.describe()
            failed[b.gang_id] = why
            log.warning("gang_bind_failed", gang=b.gang_id, namespace=b.gang_id.split("/")[0],
                        queue=b.queue, reason=why, bound=len(out.bound), parked=len(out.parked))
            if not (out.fenced or out.bound or out.parked):  # nothing kept: its claims go back
                self.prebinds.undo(b.placement.prebinds, b.gang_id)
        planned = {ref.uid: node for b in binds for ref, node in b.pod_nodes}
        return ApplyResult(
            bound=tuple(bound), failed=failed, prebinds=tuple(prebinds),
            unanswered=tuple(b.gang_id for b, out in pairs if out.unanswered),
            fenced=(*prebinds_fenced, *(b.gang_id for b, out in pairs if out.fenced)),
            # Kept bound (of a failed gang), or bound where the plan did not say (read back).
            left=tuple(pn for _, out in pairs for pn in out.bound
                       if not out.ok or planned.get(pn[0].uid) != pn[1]),
            parked=tuple(pn for _, out in pairs for pn in out.parked))

    def _bound(self, b: Bind) -> None:
        """What a person reads of a gang just bound: its event and its native PodGroup's
        condition; its pods' remembered conditions forgotten."""
        message = scheduled_message(b)
        for ref, _ in b.pod_nodes:
            self.statuses.forget_pod(ref.uid)
        if b.native is not None:
            self.writer.submit(f"pending/{b.gang_id}", partial(
                self.native_statuses.scheduled, b.native, message))
        self.writer.submit(f"event/{b.gang_id}/scheduled", partial(
            self._emit_gang, b.gang_id, _members(b), EventReason.SCHEDULED, message,
            EventType.NORMAL))
        if self.metrics is not None:
            self.metrics.pods_bound.inc(len(b.pod_nodes))

    def _announce_rollback(self, gang_id: str, pods: tuple[PodRef, ...], message: str) -> None:
        self.writer.submit(f"event/{gang_id}/rollback", partial(
            self._emit_gang, gang_id, Members(pods), EventReason.GANG_ROLLED_BACK, message,
            EventType.WARNING))

    def _emit_gang(self, gang_id: str, members: Members, reason: str, message: str,
                   type_: EventType) -> None:
        """An event on the gang's PodGroup (Kubernetes' own or scheduler-plugins'), if it has
        one, and on each of *members*' pods: ``kubectl describe pod`` is where users look.
        The recorder folds repeats into a series and rate-limits each object."""
        ns, name = gang_id.split("/", 1)
        native = members.native
        if native is not None:
            self.events.emit(ObjectRef("PodGroup", ns, name, native.uid, native.api_version),
                             reason, message, type_)
        elif members.group_uid is not None:
            self.events.emit(ObjectRef.podgroup(ns, name, members.group_uid), reason, message,
                             type_)
        for ref in members.pods:
            self.events.emit(ObjectRef.pod(ref), reason, message, type_)

    # Explaining -------------------------------------------------------------------------------
    def _explain(self, plan: CyclePlan) -> None:
        """The reason of every pending gang and of groups of pods that are not gangs yet, on
        their pods (and PodGroups)."""
        for gang_id, reason in plan.pending.items():
            members = plan.members.get(gang_id, Members())
            estimate = reason.estimated_start
            self.writer.submit(f"pending/{gang_id}", self._reason_task(
                gang_id, members, str(reason), PodGroupStatus(
                    PodGroupPhase.PENDING, reason=str(reason.category), message=str(reason),
                    estimated_start=estimate, position=reason.position,
                    estimate_time=None if estimate is None else plan.now),
                estimate=(estimate, plan.now)))
        for u in plan.unformed:
            self.writer.submit(f"pending/{u.gang_id}", self._reason_task(
                u.gang_id, u.members, str(u.reason), None, SCHEDULER_ERROR))

    def _reason_task(self, gang_id: str, members: Members, text: str,
                     status: PodGroupStatus | None, native_reason: str = UNSCHEDULABLE,
                     estimate: tuple[float | None, float] | None = None) -> Task:
        """*text* on the gang's unbound pods; *status* on its scheduler-plugins PodGroup, or
        the scheduling condition (*native_reason*) on its native one; an event with *text*
        (which carries neither the queue position nor the estimate: those move as other gangs
        come and go, so the event is repeated into its series rather than created anew);
        *estimate* (start or None, when made) as the pods' estimate annotations."""
        ns, name = gang_id.split("/", 1)

        def task() -> None:
            written = []
            for ref in members.pods:
                with self._explain_lock:
                    if ref.uid in self._binding:
                        continue  # bound since this reason was decided
                    self.statuses.set_unschedulable(ref, text)
                if estimate is not None:
                    self.statuses.set_estimate(ref, *estimate)
                written.append(ref)
            if members.pods and not written:
                return
            if members.native is not None:
                self.native_statuses.unschedulable(members.native, text, native_reason)
            elif status is not None and members.group_uid is not None:
                self.statuses.set_podgroup_status(ns, name, status)
            self._emit_gang(gang_id, replace(members, pods=tuple(written)),
                            EventReason.FAILED_SCHEDULING, text, EventType.WARNING)
        return task

    def close(self) -> None:
        """Let the binds in flight finish (their events go to the writer), then the writes."""
        self.stage.shutdown(wait=True)
        self.writer.flush()
        self.writer.stop()


def _members(b: Bind) -> Members:
    return Members(tuple(ref for ref, _ in b.pod_nodes), b.group_uid, b.native)


def scheduled_message(b: Bind) -> str:
    """The ``Scheduled`` event of a bound gang: where it went and, for an elastic gang, what
    its bind says of its optional members (how many started; in a semi-preemptible queue,
    which run above the quota and may be taken back: ``Bind.growth``)."""
    nodes = sorted({node for _, node in b.pod_nodes})
    message = (f"gang {b.gang_id} ({len(b.pod_nodes)} pods, queue {b.queue}) bound "
               f"to {len(nodes)} nodes: {', '.join(nodes[:8])}"
               f"{' ...' if len(nodes) > 8 else ''}")
    return f"{message}; {b.growth}" if b.growth else message
