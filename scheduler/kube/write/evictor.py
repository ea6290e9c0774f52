"""Carry out a plan's preemptions: mark, evict through the Eviction API, report, retry.

Each victim pod first gets a ``DisruptionTarget`` condition naming the preemptor (so the
workload and its controller can tell a preemption from a node failure), then an Eviction with
its own ``terminationGracePeriodSeconds``, capped by the configured
``evictionGracePeriodSeconds`` (``victim_grace``): a trainer keeps the time it asked for to
checkpoint on SIGTERM, and a preemptor never waits longer than the cap for its victims.
The Eviction API writes its own ``DisruptionTarget`` ("EvictionByEvictionAPI"), so the
condition is written again once the eviction is accepted: who preempted the pod is what its
owner needs to know.

Evictions honour PodDisruptionBudgets: one the apiserver refuses (429) is reported on the
pod as an ``EvictionBlocked`` event and in the result, never forced by a delete. The apiserver
checks a budget one pod at a time, so a budget allowing fewer disruptions than it covers of
the gang would let the first pods go and refuse the rest: a split gang. So the victim's
budgets are read first and the whole gang is refused when any budget covers more of its
pods than it allows (``budget_refusal``); then every pod is evicted with ``dryRun``, and
only then for real. (A budget that shrinks between that check and the evictions can still
refuse a late pod; the rest is then retried.)

A refused victim keeps its preemptor's nomination (``decide`` carries it over while the
victim runs), so the eviction of the pods still not evicted is retried here every
``retry_seconds`` for as long as the plan still nominates that preemptor: once the budget
allows it, the preemption completes. Everything comes from the plan (the victim's pods and
queue are in its ``Eviction``); the cluster cache is never read.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from scheduler.decide.plan import CyclePlan, Eviction
from scheduler.feed.grouping_terms import OPERATOR_KINDS
from scheduler.kube.client import STRATEGIC_MERGE_PATCH, TransportError
from scheduler.kube.client import path_segment as seg
from scheduler.kube.events import EventReason, EventRecorder, EventType, ObjectRef
from scheduler.kube.lead.fence import Fenced
from scheduler.kube.read.podspec import label_selector
from scheduler.kube.write.binder import FENCED, Binder, EvictOutcome
from scheduler.model import PodRef
from scheduler.model.durations import format_time
from scheduler.model.labels import LabelSelector
from scheduler.model.workloads import JOBSET_API_VERSION, JOBSET_NAME_LABEL, JOBSET_UID_LABEL

log = structlog.get_logger("gang_scheduler.evictor")

EVICTION_BLOCKED = "EvictionBlocked"


#: What the apiserver gives a pod that states no ``terminationGracePeriodSeconds``.
DEFAULT_POD_GRACE_SECONDS = 30


def victim_grace(pod_grace: int | None, cap: int) -> int:
    """The grace period a victim pod is evicted with: its own (the apiserver's default when
    it states none), never more than *cap*. A cap rather than a floor: a pod that asked
    for less (0 for a stateless worker) is not kept longer than it wants, and one that asked
    for an hour does not keep its preemptor's nodes for an hour."""
    own = DEFAULT_POD_GRACE_SECONDS if pod_grace is None else pod_grace
    return max(0, min(own, cap))


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget as the disruption controller last counted it."""

    name: str
    selector: LabelSelector
    disruptions_allowed: int


@dataclass(frozen=True, slots=True)
class VictimPod:
    """What evicting one victim pod needs beyond the plan: its labels (which budgets cover
    it) and its own grace period. Read from the apiserver at eviction time: the plan names
    the pods, and the actuators never read the cache."""

    ref: PodRef
    labels: Mapping[str, str]
    grace_period_seconds: int | None
    #: Its controlling Job as (name, uid), which is told of the preemption too: the pods
    #: go, the Job stays, and it is what a user describes while its controller recreates
    #: them. None: no Job controls it.
    job: tuple[str, str] | None = None
    #: The JobSet that made that Job as (name, uid), from the labels its controller puts on
    #: its pods: told too, since a JobSet's restart replaces its Jobs (and, with them, the
    #: events on them a user would describe). None: no JobSet.
    jobset: tuple[str, str] | None = None
    #: The operator's object controlling it (a RayCluster, a PyTorchJob: kinds in
    #: ``OPERATOR_KINDS``) as (apiVersion, kind, name, uid): told too, since that is what its
    #: user describes while the operator recreates the pods. None: no such owner.
    operator: tuple[str, str, str, str] | None = None

    @classmethod
    def from_json(cls, ref: PodRef, obj: Mapping[str, Any]) -> VictimPod:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        grace = spec.get("terminationGracePeriodSeconds")
        labels = meta.get("labels") or {}
        owner = next((o for o in meta.get("ownerReferences") or ()
                      if isinstance(o, Mapping) and o.get("controller")), None)
        job = ((str(owner.get("name") or ""), str(owner.get("uid") or ""))
               if owner is not None and owner.get("kind") == "Job" and owner.get("name")
               else None)
        operator = ((str(owner.get("apiVersion") or ""), str(owner["kind"]),
                     str(owner.get("name") or ""), str(owner.get("uid") or ""))
                    if owner is not None and owner.get("kind") in OPERATOR_KINDS
                    and owner.get("name") else None)
        named = {str(k): str(v) for k, v in labels.items()}
        jobset = ((named[JOBSET_NAME_LABEL], named.get(JOBSET_UID_LABEL, ""))
                  if named.get(JOBSET_NAME_LABEL) else None)
        return cls(ref, named,
                   grace if isinstance(grace, int) and not isinstance(grace, bool) else None,
                   job, jobset, operator)


def budget_refusal(pods: Sequence[VictimPod], budgets: Sequence[Budget]) -> str | None:
    """Why evicting all of *pods* at once would break a budget (None: it would not). A
    budget covering k of them must allow k disruptions: fewer would split the gang."""
    for budget in sorted(budgets, key=lambda b: b.name):
        covered = sum(1 for p in pods if budget.selector.matches(p.labels))
        if covered > budget.disruptions_allowed:
            return (f"blocked by PodDisruptionBudget {budget.name}: it allows "
                    f"{max(0, budget.disruptions_allowed)} disruption(s) and covers {covered} "
                    "of the gang's pods (evicting all would break the disruption budget, "
                    "fewer would split the gang)")
    return None


def budget_from_json(obj: Mapping[str, Any]) -> Budget:
    """``policy/v1`` PodDisruptionBudget -> Budget (``ValueError`` naming a bad field)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    allowed = (obj.get("status") or {}).get("disruptionsAllowed", 0)
    if isinstance(allowed, bool) or not isinstance(allowed, int):
        raise ValueError(f"status.disruptionsAllowed: expected an integer, got {allowed!r}")
    return Budget(str(meta.get("name") or "?"), label_selector(spec.get("selector"),
                                                                "spec.selector"), allowed)


class Submitter(Protocol):
    """Where background writes go (the actuator's ``BackgroundWriter``)."""

    def submit(self, key: str, task: Callable[[], None]) -> None: ...


@dataclass(frozen=True, slots=True)
class EvictionReport:
    evicted: tuple[str, ...]  # victim gangs whose every bound pod is now being evicted
    blocked: dict[str, str]  # victim gang -> why not (the apiserver's words)


class Evictor:
    def __init__(self, binder: Binder, events: EventRecorder, writer: Submitter,
                 grace_period_seconds: int, retry_seconds: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.binder, self.events = binder, events
        self.writer, self.grace, self.retry_seconds = writer, grace_period_seconds, retry_seconds
        self._monotonic = monotonic
        #: Victim gang -> when its eviction was refused, and its pods not evicted yet.
        self._blocked: dict[str, tuple[float, Eviction]] = {}

    def evict(self, plan: CyclePlan, now: float) -> EvictionReport:
        fresh = {e.victim for e in plan.evictions}
        tick = self._monotonic()
        retries = [dataclasses.replace(self._blocked[v][1], preemptor=n.gang_id,
                                       message="retrying an eviction the apiserver refused")
                   for n in plan.nominations for v in n.victims
                   if v in self._blocked and v not in fresh
                   and tick - self._blocked[v][0] >= self.retry_seconds]
        nominated = {v for n in plan.nominations for v in n.victims}
        self._blocked = {v: b for v, b in self._blocked.items() if v in nominated}
        evicted: list[str] = []
        blocked: dict[str, str] = {}
        todo = [(e, False) for e in plan.evictions] + [(e, True) for e in retries]
        for victim, retry in todo:
            refused, left = self._evict_one(victim, retry)
            if not refused:
                evicted.append(victim.victim)
                self._blocked.pop(victim.victim, None)
            else:
                blocked[victim.victim] = refused[0].reason
                self._blocked[victim.victim] = (tick, dataclasses.replace(
                    victim, release=victim.release.only(left)))
        return EvictionReport(tuple(evicted), blocked)

    def retry_in(self) -> float | None:
        """Seconds until a refused eviction is tried again (None: none refused)."""
        if not self._blocked:
            return None
        first = min(at for at, _ in self._blocked.values())
        return max(0.0, first + self.retry_seconds - self._monotonic())

    def _evict_one(self, victim: Eviction,
                   retry: bool) -> tuple[list[EvictOutcome], tuple[PodRef, ...]]:
        """Evict the victim's pods (those bound and not yet terminating when ``decide`` chose
        it), each with its own grace (``victim_grace``): the refusals (none when every pod
        went) and the pods still to evict."""
        refs = list(victim.pods)
        ns = victim.victim.split("/", 1)[0]
        keys = {"gang": victim.victim, "namespace": ns, "queue": victim.queue}
        message = victim.headline
        pods = self._read_pods(refs)
        graces = {p.ref.uid: victim_grace(p.grace_period_seconds, self.grace) for p in pods}
        whole = budget_refusal(pods, self._budgets(ns))
        refused = ([EvictOutcome(ref, False, 429, whole) for ref in refs] if whole else
                   [o for o in self.binder.executor.map(self._dry_run, refs) if not o.ok])
        left = victim.pods  # a refused dry run evicts nothing
        if not refused:
            if not retry:
                for ref in refs:
                    self._mark(ref, message, keys)
            outcomes = self.binder.evict_pods(refs, graces)
            refused = [o for o in outcomes if not o.ok]
            left = tuple(o.pod for o in refused)
        else:
            outcomes = refused
        for o in outcomes:
            if o.ok:
                self.writer.submit(f"mark/{o.pod.uid}", functools.partial(self._mark, o.pod,
                                                                          message, keys))
                self._event(o.pod, EventReason.PREEMPTED, message, "Preempting")
            else:
                who = (f"for gang {victim.preemptor}" if victim.preemptor
                       else "by a guard of its queue")
                self._event(o.pod, EVICTION_BLOCKED, f"eviction {who} refused, will retry: "
                            f"{o.reason}", "Evicting")
        if refused:
            log.warning("eviction_blocked", **keys, preemptor=victim.preemptor,
                        pods=len(refused), status=refused[0].code, reason=refused[0].reason)
            return refused, left
        log.info("gang_preempted", **keys, preemptor=victim.preemptor, pods=len(refs),
                 grace_period_seconds=max(graces.values(), default=0), retry=retry)
        self._group_event(victim, message)
        self._tell_jobs(pods, ns, victim.message if victim.preemptor in victim.message
                        else message)
        return [], ()

    def _tell_jobs(self, pods: Sequence[VictimPod], namespace: str, message: str) -> None:
        """A ``Preempted`` event on each Job whose pods were evicted (``explain`` of the
        Job reads it while the Job controller recreates them, and counts the pods:
        ``explain_workload.EVICTED``), on each JobSet that made them (``kubectl
        describe jobset`` shows it whatever its failure policy does with the Jobs), and on
        each operator's object that owns them (``kubectl describe raycluster``)."""
        jobs = Counter(p.job for p in pods if p.job is not None)
        for (name, uid), count in sorted(jobs.items()):
            job = ObjectRef("Job", namespace, name, uid, "batch/v1")
            self._event_on(job, EventReason.PREEMPTED, f"{message} ({count} pod(s) evicted; "
                           "the Job controller recreates them after its pod-failure backoff)",
                           "Preempting")
        jobsets = Counter(p.jobset for p in pods if p.jobset is not None)
        for (name, uid), count in sorted(jobsets.items()):
            jobset = ObjectRef("JobSet", namespace, name, uid, JOBSET_API_VERSION)
            self._event_on(jobset, EventReason.PREEMPTED,
                           f"{message} ({count} pod(s) of its Jobs evicted)", "Preempting")
        owners = Counter(p.operator for p in pods if p.operator is not None)
        for (api_version, kind, name, uid), count in sorted(owners.items()):
            self._event_on(ObjectRef(kind, namespace, name, uid, api_version),
                           EventReason.PREEMPTED,
                           f"{message} ({count} pod(s) evicted; its operator recreates them)",
                           "Preempting")

    def _mark(self, pod: PodRef, message: str, keys: dict[str, str]) -> None:
        """``DisruptionTarget=True``, reason ``PreemptionByScheduler``, naming the preemptor;
        *keys* (gang, namespace, queue of the victim) go into any log line."""
        condition = {"type": "DisruptionTarget", "status": "True",
                     "reason": "PreemptionByScheduler", "message": message,
                     "lastTransitionTime": format_time(time.time())}
        path = f"/api/v1/namespaces/{seg(pod.namespace)}/pods/{seg(pod.name)}/status"
        try:
            resp = self.binder.client.request(
                "PATCH", path, body={"metadata": {"uid": pod.uid},
                                     "status": {"conditions": [condition]}},
                content_type=STRATEGIC_MERGE_PATCH, timeout=self.binder.timeout)
        except TransportError as exc:
            log.warning("disruption_target_failed", **keys, pod=pod.name, reason=str(exc))
            return
        if not resp.ok and resp.status not in (404, 409):  # gone already: nothing to say
            log.warning("disruption_target_failed", **keys, pod=pod.name, status=resp.status,
                        reason=resp.message())

    def _read_pods(self, refs: Sequence[PodRef]) -> list[VictimPod]:
        """The victim pods as they are now (a pod gone or recreated since is left out: its
        eviction answers 404/409 and counts as done)."""
        def read(ref: PodRef) -> VictimPod | None:
            path = f"/api/v1/namespaces/{seg(ref.namespace)}/pods/{seg(ref.name)}"
            try:
                resp = self.binder.client.request("GET", path, timeout=self.binder.timeout)
            except TransportError:
                return VictimPod(ref, {}, None)  # unknown: the default grace, no budget match
            obj = resp.json() if resp.ok else None
            if not isinstance(obj, dict) or (obj.get("metadata") or {}).get("uid") != ref.uid:
                return None
            return VictimPod.from_json(ref, obj)
        return [p for p in self.binder.executor.map(read, refs) if p is not None]

    def _budgets(self, namespace: str) -> list[Budget]:
        """The namespace's PodDisruptionBudgets; none readable: the dry runs still guard."""
        path = f"/apis/policy/v1/namespaces/{seg(namespace)}/poddisruptionbudgets"
        try:
            resp = self.binder.client.request("GET", path, timeout=self.binder.timeout)
        except TransportError as exc:
            log.warning("budgets_unread", namespace=namespace, reason=str(exc))
            return []
        if not resp.ok:
            log.warning("budgets_unread", namespace=namespace, status=resp.status,
                        reason=resp.message())
            return []
        budgets = []
        for item in (resp.json() or {}).get("items") or ():
            try:
                budgets.append(budget_from_json(item))
            except (ValueError, AttributeError, TypeError) as exc:
                log.warning("budget_skipped", namespace=namespace,
                            budget=(item.get("metadata") or {}).get("name"), reason=str(exc))
        return budgets

    def _dry_run(self, pod: PodRef) -> EvictOutcome:
        """Would the apiserver evict *pod* now (PodDisruptionBudgets)? Nothing is changed."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod.name, "namespace": pod.namespace},
                "deleteOptions": {"dryRun": ["All"], "preconditions": {"uid": pod.uid}}}
        path = f"/api/v1/namespaces/{seg(pod.namespace)}/pods/{seg(pod.name)}/eviction"
        try:
            resp = self.binder.client.request("POST", path, query={"dryRun": "All"}, body=body,
                                              timeout=self.binder.timeout)
        except Fenced as exc:
            return EvictOutcome(pod, False, FENCED, str(exc))
        except TransportError as exc:
            return EvictOutcome(pod, False, 0, f"no reply from the apiserver: {exc}")
        if resp.ok or resp.status in (404, 409):
            return EvictOutcome(pod, True, resp.status)
        why = "blocked by PodDisruptionBudget: " if resp.status == 429 else ""
        return EvictOutcome(pod, False, resp.status, why + resp.message())

    def _group_event(self, victim: Eviction, message: str) -> None:
        """``Preempted`` on the victim's PodGroup (scheduler-plugins' or Kubernetes' own), once
        its eviction went through, naming the preemptor: ``kubectl describe podgroup`` is where
        a gang's owner looks, and the pods that got theirs are about to go."""
        native = victim.native
        if native is not None:
            ref = ObjectRef("PodGroup", native.namespace, native.name, native.uid,
                            native.api_version)
        elif victim.group_uid is not None:
            ns, name = victim.victim.split("/", 1)
            ref = ObjectRef.podgroup(ns, name, victim.group_uid)
        else:
            return
        self._event_on(ref, EventReason.PREEMPTED, message, "Preempting")

    def _event(self, pod: PodRef, reason: str, message: str, action: str) -> None:
        self._event_on(ObjectRef.pod(pod), reason, message, action)

    def _event_on(self, ref: ObjectRef, reason: str, message: str, action: str) -> None:
        def task() -> None:
            self.events.emit(ref, reason, message, EventType.WARNING, action=action)
        self.writer.submit(f"event/{ref.uid}/{reason}", task)
