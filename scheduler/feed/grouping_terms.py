"""What a group of pods asks for, read from the pods, their PodGroup or Job and annotations.

``grouping`` decides which pods form a gang; this module reads what that gang asks for: its
roles (pods of identical requirements, the required count spread over them), its size
(``minMember``) or why it cannot be known, its topology constraint, its runtime estimate and
whether it may preempt. Each is one small pure function of the pods and the objects around
them, shared by pending and running gangs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

from scheduler.model import PodRef, PodRequirements, Role, TopologyConstraint
from scheduler.model.demand import MILLI, claim_key, claims_demand
from scheduler.model.device_inventory import EMPTY_INVENTORY, DeviceInventory
from scheduler.model.durations import MAX_DURATION_SECONDS, parse_duration
from scheduler.model.gangs import Tier, TopologyMode
from scheduler.model.labels import Labels
from scheduler.model.numerals import parse_int
from scheduler.model.pods import PreemptionPolicy
from scheduler.model.workloads import (
    EXPECTED_RUNTIME_ANNOTATION,
    JOBSET_NAME_LABEL,
    MAX_RUNTIME_ANNOTATION,
    MIN_MEMBER_ANNOTATION,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    ROLE_LABEL,
    RUNTIME_SECONDS_ANNOTATION,
    TIER_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    JobInfo,
    OwnerRef,
    PodGroupInfo,
    PodInfo,
)

TOPOLOGY_REQUIRED_ANNOTATION = "gangscheduler.io/topology-required"
TOPOLOGY_PREFERRED_ANNOTATION = "gangscheduler.io/topology-preferred"
#: Controllers that create pods themselves, one gang per object they own (Kubeflow's
#: training operator v1 kinds, KubeRay's RayCluster).
OPERATOR_KINDS = frozenset({"PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "PaddleJob",
                            "JAXJob", "RayCluster"})
#: Those whose own object gang-scheduler reads to size the gang
#: (``scheduler.kube.read.operator_convert``); the others need a PodGroup or annotation.
SIZED_OPERATOR_KINDS = frozenset({"PyTorchJob", "MPIJob", "RayCluster"})


def annotation(key: str, *sources: Mapping[str, str]) -> str | None:
    """The first non-empty value of *key* in *sources* (the gang's own objects first)."""
    for src in sources:
        if src.get(key):
            return src[key]
    return None


def roles(pods: list[PodInfo], min_total: int,
          devices: DeviceInventory = EMPTY_INVENTORY) -> tuple[Role, ...]:
    """Pods with identical requirements form one role; the required count is spread in order.

    Pods are also split by the labels the gang's own affinity and spread selectors read, so
    that whether a member matches a fellow member's term is a property of its role. A
    role's device claims count for the GPUs of its first member's (``claims_demand``: its
    members' claims are made from the same templates).
    """
    keys = sorted(frozenset().union(*(p.requirements.constraints.selector_keys for p in pods)))
    by_req: dict[tuple[PodRequirements, tuple[str | None, ...]], list[PodInfo]] = {}
    for pod in sorted(pods, key=lambda p: p.name):
        split = tuple(pod.labels.get(k) for k in keys)
        by_req.setdefault((pod.requirements, split), []).append(pod)
    groups = sorted(by_req.values(), key=lambda ps: ps[0].name)
    users = claim_users(pods)
    roles: list[Role] = []
    remaining = min_total
    for i, members in enumerate(groups):
        labels = {p.labels.get(ROLE_LABEL, "") for p in members}
        name = labels.pop() if len(labels) == 1 and "" not in labels else f"role-{i}"
        required = min(len(members), max(0, remaining))
        remaining -= required
        common, mixed = _shared_labels(members)
        first = members[0]
        uses = first.requirements.constraints.device_claims
        device_gpus, device_milli = (claims_demand(uses, first.namespace,
                                                   first.claim_statuses, devices, users)
                                     if uses else (0, 0))
        roles.append(Role(name=name, count=len(members), requirements=first.requirements,
                          min_count=required,
                          pods=tuple(PodRef(p.namespace, p.name, p.uid, p.claim_statuses)
                                     for p in members),
                          labels=common, mixed_labels=mixed, device_gpus=device_gpus,
                          device_milli=(None if device_milli == device_gpus * MILLI
                                        else device_milli)))
    return tuple(roles)


def claim_users(pods: Iterable[PodInfo]) -> Counter[str]:
    """Claim key -> how many of *pods* use it: a claim they share (a PodGroup's, a named
    one) counts once for the gang, split among its users (``claims_gpus``)."""
    users: Counter[str] = Counter()
    for pod in pods:
        keys = {claim_key(use, pod.namespace, pod.claim_statuses)
                for use in pod.requirements.constraints.device_claims}
        users.update(k for k in keys if k)
    return users


def _shared_labels(pods: list[PodInfo]) -> tuple[Labels, frozenset[str]]:
    """The labels all *pods* carry alike, and the keys only some carry (or differently)."""
    first = pods[0].labels
    if all(p.labels == first for p in pods[1:]):
        return Labels(first), frozenset()
    common = dict(first)
    seen: set[str] = set(first)
    for p in pods[1:]:
        seen.update(p.labels)
        for k in list(common):
            if p.labels.get(k) != common[k]:
                del common[k]
    return Labels(common), frozenset(seen - set(common))


def preemption_policy(pods: Iterable[PodInfo]) -> PreemptionPolicy:
    """``Never`` if any member says so: evicting others for the gang would evict them for
    that member too, which its PriorityClass forbids."""
    never = any(p.preemption_policy is PreemptionPolicy.NEVER for p in pods)
    return PreemptionPolicy.NEVER if never else PreemptionPolicy.PREEMPT_LOWER_PRIORITY


def topology(*sources: Mapping[str, str]) -> TopologyConstraint | None:
    required = annotation(TOPOLOGY_REQUIRED_ANNOTATION, *sources)
    if required:
        return TopologyConstraint(level=required, mode=TopologyMode.REQUIRED)
    preferred = annotation(TOPOLOGY_PREFERRED_ANNOTATION, *sources)
    if preferred:
        return TopologyConstraint(level=preferred, mode=TopologyMode.PREFERRED)
    return None


def min_member(gid: str, pods: list[PodInfo], group: PodGroupInfo | None, job: JobInfo | None,
               meta: list[Mapping[str, str]], per_pod: bool) -> tuple[int, str | None]:
    """The gang's size and, when it cannot be known, why: its PodGroup's minMember, the
    min-member annotation, its Job's gang size, else 1 (*per_pod*: every pod alone)."""
    if per_pod:
        return 1, None
    # Pods that name this gang's PodGroup (those of a JobSet's earlier step name it too, but
    # are their replicated Job's gang: ``grouping_jobset``).
    named = any(f"{p.namespace}/{p.labels.get(POD_GROUP_LABEL)}" == gid
                or f"{p.namespace}/{p.annotations.get(VOLCANO_GROUP_ANNOTATION)}" == gid
                for p in pods)
    if group is not None:
        return max(1, group.min_member), None
    explicit = annotation(MIN_MEMBER_ANNOTATION, *meta)
    if explicit:
        try:
            return max(1, parse_int(explicit)), None
        except ValueError:
            return 1, f"annotation {MIN_MEMBER_ANNOTATION}: not an integer: {explicit!r}"
    if named:
        return 1, (f"PodGroup {gid} does not exist; create it (or set annotation "
                   f"{MIN_MEMBER_ANNOTATION} on the pods) so the gang size is known")
    if job is not None:
        return job.min_member, job.unknown or None
    if any(p.owner is not None and p.owner.kind == "Job" for p in pods):
        return 1, (f"Job {gid} is not known (yet); its pods wait for it so that the gang "
                   "size (parallelism) is known")
    operator = next((p.owner for p in pods if p.owner is not None
                     and p.owner.kind in OPERATOR_KINDS), None)
    if operator is not None and operator.kind in SIZED_OPERATOR_KINDS:
        return 1, (f"{operator.kind} {gid} is not known (yet); its pods wait for it so that "
                   "the gang size (its replicas) is known (is its CRD served, and may "
                   f"gang-scheduler list {operator.kind}s?)")
    if operator is not None:
        return 1, (f"{operator.kind} {gid} names no gang: gang-scheduler does not read "
                   f"{operator.kind} replicas, so the PodGroup {gid} is missing; enable the "
                   "operator's gang scheduling (it creates the PodGroup) or set annotation "
                   f"{MIN_MEMBER_ANNOTATION} on the pods")
    return 1, None


def explicit_min_member(meta: list[Mapping[str, str]]) -> int | None:
    """The min-member annotation's value, None when absent or unreadable (the edges warn
    about a bad one: ``scheduler.model.annotation_checks``)."""
    text = annotation(MIN_MEMBER_ANNOTATION, *meta)
    if not text:
        return None
    try:
        return max(1, parse_int(text))
    except ValueError:
        return None


def runtime(meta: list[Mapping[str, str]], job: JobInfo | None) -> float | None:
    """The expected-runtime annotation, else the Job's activeDeadlineSeconds, else None.

    A deadline beyond ``MAX_DURATION_SECONDS`` says no more than none does, and would put
    the gang's expected end beyond any timestamp: it is no estimate either."""
    text = annotation(EXPECTED_RUNTIME_ANNOTATION, *meta)
    if text:
        try:
            return parse_duration(text)
        except ValueError:
            pass  # an unreadable estimate is treated as none; the queue default applies
    deadline = job.active_deadline_seconds if job is not None else None
    if deadline and deadline <= MAX_DURATION_SECONDS:
        return float(deadline)
    return None


def max_runtime(meta: list[Mapping[str, str]]) -> float | None:
    """The max-runtime annotation (None: none, or unreadable: then the edges warn about it,
    ``scheduler.model.annotation_checks``, and the queue's ``maxRuntimeSeconds`` alone
    applies)."""
    text = annotation(MAX_RUNTIME_ANNOTATION, *meta)
    if not text:
        return None
    try:
        seconds = parse_duration(text)
    except ValueError:
        return None
    return seconds if seconds > 0 else None


def ran_before(meta: list[Mapping[str, str]]) -> float:
    """Seconds the workload ran in earlier runs (``gangscheduler.io/runtime-seconds``, which
    the scheduler writes on its owner); 0 when none is written or it cannot be read (the
    edges warn about it: ``scheduler.model.annotation_checks``)."""
    text = annotation(RUNTIME_SECONDS_ANNOTATION, *meta)
    if not text:
        return 0.0
    try:
        seconds = float(text)
    except ValueError:
        return 0.0
    return seconds if math.isfinite(seconds) and seconds > 0 else 0.0


def workload_owner(pods: list[PodInfo], group: PodGroupInfo | None,
                   job: JobInfo | None) -> OwnerRef | None:
    """The object a user submitted for the gang, which outlives its runs (a JobSet restarted
    by its failurePolicy, a Job whose pods are recreated): where the runtime of its runs is
    kept (``RUNTIME_SECONDS_ANNOTATION``). Its JobSet, else its Job, else its PodGroup; None
    for a lone pod (it never runs twice) and a native PodGroup's gang without a Job."""
    if job is not None and job.uid:
        labelled = next((p for p in pods if p.labels.get(JOBSET_NAME_LABEL)), None)
        if labelled is not None:
            return OwnerRef("JobSet", labelled.labels[JOBSET_NAME_LABEL], job.uid)
        return OwnerRef("Job", job.name, job.uid)
    if group is not None and group.uid:
        return OwnerRef("PodGroup", group.name, group.uid)
    return None


def tier(labeled: list[tuple[str, Mapping[str, str]]]) -> Tier:
    """The gang's tier: the ``gangscheduler.io/tier`` label of the first source in *labeled*
    (``QUEUE_PRECEDENCE``) that has one. A value other than ``interactive`` or ``batch`` is
    batch: the lenient reading keeps a typo from blocking the gang, and the edges warn about
    it (``scheduler.model.annotation_checks.label_problems``) so its user learns why their
    notebook is treated as batch work."""
    value = annotation(TIER_LABEL, *(labels for _, labels in labeled))
    return Tier.INTERACTIVE if value == Tier.INTERACTIVE.value else Tier.BATCH


def _who(sources: list[str], pods_agree: bool) -> str:
    """``PodGroup``, ``its pods`` (when every pod that says anything says the same, so that
    the notice does not change as the gang's pods arrive), ``pod a``, ``pods a, b and 5
    more``."""
    others = [s for s in sources if not s.startswith("pod ")]
    pods = [s.removeprefix("pod ") for s in sources if s.startswith("pod ")]
    if pods and pods_agree:
        others.append("its pods")
    elif len(pods) == 1:
        others.append(f"pod {pods[0]}")
    elif pods:
        more = f" and {len(pods) - 3} more" if len(pods) > 3 else ""
        others.append(f"pods {', '.join(pods[:3])}{more}")
    return ", ".join(others)


def _named(says: Mapping[str, list[str]] | Mapping[int, list[str]]) -> str:
    """``PodGroup: 'a'; its pods: 'b'`` for value -> who says it."""
    pods_agree = sum(1 for whos in says.values() if any(w.startswith("pod ") for w in whos)) == 1
    return "; ".join(f"{_who(whos, pods_agree)}: {value!r}" for value, whos in says.items())


#: The order the sources of a gang's queue are read in (documented in ``queue_of``).
QUEUE_PRECEDENCE = "its PodGroup or Workload, then its Job or JobSet, then its pods by name"


def queue_of(labeled: list[tuple[str, Mapping[str, str]]], default: str) -> tuple[str, str]:
    """The gang's queue: the ``gangscheduler.io/queue`` label of the first source in
    *labeled* (``QUEUE_PRECEDENCE``: (what, labels) pairs in that order) that has one, else
    *default*; and, when sources name different queues, a notice naming each and the one
    used ("" when they agree): the gang is bound all the same, so only a word tells its user
    that some of its objects said otherwise."""
    says: dict[str, list[str]] = {}
    for who, labels in labeled:
        if value := labels.get(QUEUE_LABEL):
            says.setdefault(value, []).append(who)
    if not says:
        return default, ""
    chosen = next(iter(says))
    if len(says) == 1:
        return chosen, ""
    return chosen, (f"label {QUEUE_LABEL} differs ({_named(says)}); the gang uses {chosen!r}, "
                    f"the first found in {QUEUE_PRECEDENCE}")


def priority_notice(pods: list[PodInfo], own: int | None) -> str:
    """When the gang's members disagree on priority, or with its PodGroup's own priority
    (*own*, None: it has none), what the gang uses: *own* if given, else the members'
    highest (as a gang it is one priority, the one it waits and is preempted at). "" when
    all agree."""
    first = own if own is not None else pods[0].priority if pods else None
    if all(p.priority == first for p in pods):  # (each gang built, most agree)
        return ""
    says: dict[int, list[str]] = {} if own is None else {own: ["PodGroup"]}
    for p in sorted(pods, key=lambda p: p.name):
        says.setdefault(p.priority, []).append(f"pod {p.name}")
    if len(says) <= 1:
        return ""
    if own is not None:
        return f"priority differs ({_named(says)}); the gang uses {own}, its PodGroup's"
    return f"priority differs ({_named(dict(sorted(says.items())))}); the gang uses " \
           f"{max(says)}, the highest"
