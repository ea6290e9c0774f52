"""Group observed pods into gangs: the one place that decides what a gang is.

A pod belongs to, in order of precedence:

1. the scheduler-plugins PodGroup named by its ``scheduling.x-k8s.io/pod-group`` label
   (what the coscheduling plugin and Kubeflow Trainer's coscheduling policy create), or
   the group named by Volcano's ``scheduling.k8s.io/group-name`` annotation; in a JobSet
   that creates its replicated Jobs in steps, only the last step's (``grouping_jobset``);
2. the JobSet that made its Job: one gang across the replicated Jobs that start together
   (``grouping_jobset``);
3. the ``scheduling.k8s.io`` PodGroup named in its ``spec.schedulingGroup.podGroupName``
   (Kubernetes' own gang API; its terms are worked out in ``grouping_native``). After 1 and
   2 because, with the ``WorkloadWithJob`` gate, the Job controller gives every Indexed Job
   its own PodGroup, which would split a JobSet or a TrainJob into one gang per Job;
4. its controlling ``batch/v1`` Job, whose gang size is what its controller runs at once:
   parallelism, capped by the completions still to go (`JobInfo.gang_size`; its pods wait
   until the Job itself is seen, so they are never placed one by one meanwhile);
5. its controlling operator's object (PyTorchJob, MPIJob, RayCluster, TFJob, ...: kinds in
   ``OPERATOR_KINDS``): the ``gangscheduler.io/min-member`` annotation, else for the kinds
   whose object is read (``SIZED_OPERATOR_KINDS``) the replicas its operator creates and
   its own minimum (``scheduler.kube.read.operator_convert``; its pods wait until the
   object is seen), else its pods wait with a reason naming the PodGroup that is missing
   (never a gang of one each);
6. otherwise, itself: a lone pod is a gang of one.

Members already bound and running count towards ``minMember`` (as in the coscheduling
plugin; members being deleted do not: an evicted gang's replacements are a new gang, placed
whole), so a replacement for one failed worker of a running gang is not kept hostage to the
whole gang's size, and a gang left partly bound by a crash is completed by placing just the
missing members, or rolled back by the caller when that is impossible.

A gang's queue is the first ``gangscheduler.io/queue`` label on its PodGroup (or Workload),
its Job (or JobSet), its pods by name; its tier (``gangscheduler.io/tier: interactive``, else
batch) the first such label in the same order; its priority its native PodGroup's, else its
members' highest. Where they disagree the gang carries a notice naming each value and the one used
(``Gang.notices``), which the edge tells its user once (``scheduler.kube.write.gang_notices``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from scheduler.feed import grouping_jobset, grouping_native, grouping_terms
from scheduler.feed.grouping_terms import OPERATOR_KINDS, SIZED_OPERATOR_KINDS
from scheduler.model import Gang, PodRef, RunningGang, elastic, shortfall
from scheduler.model.device_inventory import EMPTY_INVENTORY, DeviceInventory
from scheduler.model.durations import parse_time
from scheduler.model.gangs import Tier
from scheduler.model.native import NativeGroupInfo, ResolvedGroup
from scheduler.model.resources import Resources, total
from scheduler.model.shortfall import Shortfall
from scheduler.model.workloads import (
    LAST_CHECKPOINT_ANNOTATION,
    POD_GROUP_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    JobInfo,
    JobSetInfo,
    OwnerRef,
    PodGroupInfo,
    PodInfo,
    PodPhase,
    operator_key,
)


@dataclass(frozen=True, slots=True)
class GroupingConfig:
    scheduler_name: str = "gang-scheduler"
    default_queue: str = "default"
    #: Baseline for the simulator: every pod is its own gang (kube-scheduler's behaviour).
    per_pod: bool = False


@dataclass(frozen=True, slots=True)
class GangSet:
    """Everything the cycle needs to know about gangs, built from one view of the pods."""

    pending: tuple[Gang, ...]
    #: Running gangs by id (any order; ``running`` sorts them when asked).
    running_by_id: Mapping[str, RunningGang]
    #: Per-node usage of pods that are not ours (other schedulers): capacity, never victims.
    other_usage: Mapping[str, Resources]
    #: Gangs with some members bound while fewer than minMember are: id -> bound pods.
    partially_bound: Mapping[str, tuple[PodRef, ...]] = field(default_factory=dict)
    #: Gangs that cannot even be formed (e.g. their PodGroup does not exist): id -> why.
    problems: Mapping[str, str] = field(default_factory=dict)

    @property
    def running(self) -> tuple[RunningGang, ...]:
        """Running gangs sorted by id (worked out on use: cycles only need the snapshot's)."""
        by_id = self.running_by_id
        return tuple(by_id[gid] for gid in sorted(by_id))


def group_id(pod: PodInfo, jobs: Mapping[str, JobInfo], config: GroupingConfig,
             jobsets: Mapping[str, JobSetInfo] | None = None) -> str:
    """The gang a pod belongs to, as ``namespace/name`` of its group, JobSet, Job, operator
    job or itself."""
    if config.per_pod:
        return f"{pod.namespace}/{pod.name}"
    name = pod.labels.get(POD_GROUP_LABEL) or pod.annotations.get(VOLCANO_GROUP_ANNOTATION)
    owner = pod.owner
    if name:
        by_step = (grouping_jobset.step_gang_id(pod.namespace, pod.labels, jobsets or {})
                   if owner is not None and owner.kind == "Job" else None)
        return by_step or f"{pod.namespace}/{name}"
    by_set = (grouping_jobset.set_gang_id(pod.namespace, pod.labels, jobsets or {})
              if owner is not None and owner.kind == "Job" else None)
    if by_set:
        return by_set
    if pod.pod_group_name:
        return f"{pod.namespace}/{pod.pod_group_name}"
    if owner is not None and owner.kind == "Job":
        # Even before the Job itself is seen (another watch): never a lone pod meanwhile.
        return f"{pod.namespace}/{owner.name}"
    if owner is not None and owner.kind in OPERATOR_KINDS:
        return f"{pod.namespace}/{owner.name}"
    return f"{pod.namespace}/{pod.name}"


@dataclass(frozen=True, slots=True)
class GangEntry:
    """What one group of pods amounts to; the cache keeps one per gang id and rebuilds it
    only when one of its pods, its PodGroup or its Job changes."""

    pending: Gang | None = None
    running: RunningGang | None = None
    partially_bound: tuple[PodRef, ...] = ()
    problem: str | None = None


def is_ours(pod: PodInfo, config: GroupingConfig) -> bool:
    return pod.scheduler_name == config.scheduler_name


def build_gang(gid: str, gang_pods: list[PodInfo], group: PodGroupInfo | None,
               job: JobInfo | None, config: GroupingConfig,
               native: ResolvedGroup | None = None,
               devices: DeviceInventory = EMPTY_INVENTORY, arrival: int = 0) -> GangEntry:
    """The entry for one gang id from its live (not finished) member pods; *native* is the
    ``scheduling.k8s.io`` PodGroup (and Workload) its pods name, if they name one; *devices*
    what its members' device claims count for (``Role.device_gpus``); *arrival* the order
    the cache first saw it in (``Gang.arrival``)."""
    succeeded = sum(1 for p in gang_pods if p.phase is PodPhase.SUCCEEDED)
    if job is not None and job.completions is not None and succeeded > job.succeeded:
        # Its status counts them a moment later (not at all while its controller's writes
        # fail across an apiserver restart): until then the gang would look short of a
        # member, and a gang cut mid-bind rolled back for it (MemberGone) on a takeover.
        job = replace(job, succeeded=succeeded)
    members, gang_pods = gang_pods, [p for p in gang_pods if not p.is_finished]
    if not gang_pods:
        return GangEntry()
    gang_pods.sort(key=lambda p: p.name)
    bound = [p for p in gang_pods if p.is_bound]
    # Members being deleted (evicted, preempted, on a lost node) are leaving: they count
    # towards nothing, so replacements their controller creates at once form the gang anew
    # (all of them, together) instead of being bound one by one beside the leavers.
    staying = [p for p in bound if not p.terminating]
    waiting = [p for p in gang_pods if not p.is_bound and not p.terminating]
    ns, name = gid.split("/", 1)
    terms = (grouping_native.native_terms(gid, native, staying, job)
             if not config.per_pod and grouping_native.names_native_group(gid, gang_pods)
             else None)
    if terms is not None:
        group = None  # a namesake scheduler-plugins PodGroup is not this gang's
    meta = [*(terms.annotations if terms else ()), group.annotations if group else {},
            job.annotations if job else {}, *(p.annotations for p in gang_pods)]
    labeled = [*zip(("PodGroup", "Workload"), terms.labels if terms else (), strict=False),
               *((("PodGroup", group.labels),) if group else ()),
               *(((f"owner {job.name}", job.labels),) if job else ()),
               *((f"pod {p.name}", p.labels) for p in gang_pods)]
    if terms is not None and terms.min_member is not None:
        min_member, problem = terms.min_member, terms.problem
        if native is not None and native.group.job_key and job is not None:
            # The Job controller wrote minCount (its parallelism); the user's min-member
            # annotation on the Job or its pods says the Job's own minimum (elastic).
            min_member = grouping_terms.explicit_min_member(meta) or min_member
    else:
        min_member, problem = grouping_terms.min_member(gid, gang_pods, group, job, meta,
                                                        config.per_pod)
        problem = terms.problem if terms is not None and terms.problem else problem
    gated = next((p for p in waiting if p.scheduling_gates), None)
    if gated is not None and not problem:
        # No scheduler may place a gated pod; the whole gang waits for its gates to go.
        problem = (f"pod {gated.name} has scheduling gates ({', '.join(gated.scheduling_gates)}): "
                   "the gang is considered once they are removed")
    queue, queue_notice = grouping_terms.queue_of(labeled, config.default_queue)
    notices = tuple(n for n in (queue_notice, grouping_terms.priority_notice(
        gang_pods, terms.priority if terms is not None else None)) if n)
    runtime = grouping_terms.runtime(meta, job)
    limit = grouping_terms.max_runtime(meta)
    ran_before = grouping_terms.ran_before(meta)
    owner = grouping_terms.workload_owner(gang_pods, group, job)
    tier = grouping_terms.tier(labeled)
    running = None
    if bound:
        # Built once with every term (each gang whose pods changed, every cycle of a long
        # simulation: a copy per term cost as much as the rest of the entry).
        running = _running_gang(
            gid, bound, queue, runtime, meta, devices,
            priority=terms.priority if terms is not None else None,
            max_runtime=limit, ran_before=ran_before, owner=owner, tier=tier,
            native=native.group if terms is not None and native is not None else None,
            notices=notices, group_uid=group.uid if group is not None else None,
            lost=shortfall.of_members(members, min_member, job) or None)
    # Elastic: its minimum is below the pods it has (those leaving count for nothing, but
    # its Job's size stands while it gives members back).
    most = max(len(staying) + len(waiting), job.gang_size if job is not None else 0)
    if running is not None and min_member < most and not problem:
        running = elastic_terms(running, min_member, bound)
    partial: tuple[PodRef, ...] = ()
    if (staying and waiting and len(staying) < min_member
            and (terms is None or terms.may_roll_back)):
        partial = tuple(PodRef(p.namespace, p.name, p.uid) for p in staying)
    pending = None
    if waiting and not problem:
        required = max(0, min_member - len(staying))
        # The owner's age, not its pods': a Job's pods recreated after an eviction or a
        # rollback keep the gang's place in line (and its reservation threshold clock).
        created = (terms.creation_time if terms and terms.creation_time is not None
                   else group.creation_time if group
                   else job.creation_time if job and job.creation_time
                   else min(p.creation_time for p in gang_pods))
        short = len(waiting) < required
        uid = (terms.uid if terms and terms.uid
               else group.uid if group else (job.uid if job else waiting[0].uid))
        priority = max(p.priority for p in gang_pods)
        pending = Gang(
            id=gid, uid=uid,
            namespace=ns, name=name, queue=queue,
            roles=grouping_terms.roles(waiting, required, devices),
            priority=terms.priority if terms and terms.priority is not None else priority,
            creation_time=created,
            arrival=arrival,
            topology=(terms.topology if terms and terms.topology
                      else grouping_terms.topology(*meta)),
            runtime_estimate=runtime,
            max_runtime=limit,
            ran_before=ran_before,
            owner=owner,
            tier=tier,
            preemption_policy=(terms.preemption_policy if terms and terms.preemption_policy
                               else grouping_terms.preemption_policy(gang_pods)),
            min_resources=group.min_resources if group and short else None,
            present_members=len(waiting) if short else None,
            declared_min_member=required if short else None,
            pod_group=group is not None,
            later_steps=job.later_steps if job else "",
            native=native.group if terms is not None and native is not None else None,
            notices=notices,
        )
    return GangEntry(pending=pending, running=running, partially_bound=partial, problem=problem)


def gang_set(entries: Mapping[str, GangEntry], other_usage: Mapping[str, Resources]) -> GangSet:
    """Assemble per-gang entries (any order) into the sorted ``GangSet`` a cycle consumes."""
    ids = sorted(entries)
    return GangSet(
        pending=tuple(e.pending for gid in ids if (e := entries[gid]).pending is not None),
        running_by_id={gid: e.running for gid in ids if (e := entries[gid]).running is not None},
        other_usage=other_usage,
        partially_bound={gid: e.partially_bound for gid in ids
                         if (e := entries[gid]).partially_bound},
        problems={gid: e.problem for gid in ids if (e := entries[gid]).problem},
    )


def gang_job(gid: str, pods: Iterable[PodInfo], jobs: Mapping[str, JobInfo],
             native: ResolvedGroup | None,
             jobsets: Mapping[str, JobSetInfo] | None = None,
             operators: Mapping[str, JobInfo] | None = None) -> JobInfo | None:
    """The Job behind a gang: the gang's own id, the Job that made its native PodGroup,
    its JobSet's Jobs that start together, as one (``grouping_jobset.set_job``), or the
    operator's object that owns its pods (*operators* by ``operator_key``)."""
    job_key = native.group.job_key if native is not None else None
    if job_key:
        return jobs.get(job_key)
    pods = list(pods)
    return (grouping_jobset.set_job(gid, pods, jobsets or {}, jobs)
            or operator_job(gid, pods, operators or {}) or jobs.get(gid))


def operator_job(gid: str, pods: Iterable[PodInfo],
                 operators: Mapping[str, JobInfo]) -> JobInfo | None:
    """The object of a sized operator kind that owns gang *gid*'s pods (the gang is named
    after it), as the Job its gang is sized by; None if none is (or is not seen yet)."""
    for pod in pods:
        owner = pod.owner
        if (owner is not None and owner.kind in SIZED_OPERATOR_KINDS
                and f"{pod.namespace}/{owner.name}" == gid):
            return operators.get(operator_key(owner.kind, pod.namespace, owner.name))
    return None


def gang_group(group: PodGroupInfo | None, pods: Iterable[PodInfo],
               jobsets: Mapping[str, JobSetInfo]) -> PodGroupInfo | None:
    """The PodGroup of a gang as its gang sees it: in a JobSet's last step, less the members
    of the earlier steps (``grouping_jobset.step_group``)."""
    return None if group is None else grouping_jobset.step_group(group, pods, jobsets)


def build_gangs(
    pods: Iterable[PodInfo],
    groups: Mapping[str, PodGroupInfo],
    jobs: Mapping[str, JobInfo],
    config: GroupingConfig,
    natives: Mapping[str, ResolvedGroup] | None = None,
    jobsets: Mapping[str, JobSetInfo] | None = None,
    devices: DeviceInventory = EMPTY_INVENTORY,
    operators: Mapping[str, JobInfo] | None = None,
) -> GangSet:
    """Group *pods* (all pods in the cluster) into pending and running gangs; *natives* are
    the ``scheduling.k8s.io`` PodGroups and *jobsets* the JobSets by ``namespace/name``,
    *operators* the operators' objects by ``operator_key``."""
    natives = natives or {}
    jobsets = jobsets or {}
    other: dict[str, list[Resources]] = defaultdict(list)
    members: dict[str, list[PodInfo]] = defaultdict(list)
    for pod in pods:
        if not is_ours(pod, config):
            if pod.occupies_node:
                other[pod.node_name].append(pod.requests)
            continue
        members[group_id(pod, jobs, config, jobsets)].append(pod)
    entries = {gid: build_gang(gid, ps, gang_group(groups.get(gid), ps, jobsets),
                               gang_job(gid, ps, jobs, natives.get(gid), jobsets,
                                        operators),
                               config, natives.get(gid), devices)
               for gid, ps in members.items()}
    return gang_set(entries, {node: total(res) for node, res in sorted(other.items())})


def elastic_terms(running: RunningGang, min_member: int, bound: list[PodInfo]) -> RunningGang:
    """*running* as an elastic gang: fewer members than its pods may run (its minimum is
    below the pods it has), so it says its minimum and which member runs where, for a
    shrink to release only the members above the minimum (``scheduler.model.elastic``)."""
    refs = {p.uid: PodRef(p.namespace, p.name, p.uid, p.claim_statuses) for p in bound}
    pod_nodes = tuple(sorted(((refs[p.uid], p.node_name) for p in bound if p.occupies_node),
                             key=lambda pn: elastic.rank_key(pn[0])))
    leaving = frozenset(refs[p.uid] for p in bound if p.terminating and p.occupies_node)
    return replace(running, min_member=min_member, pod_nodes=pod_nodes, leaving=leaving)


def _running_gang(gid: str, bound: list[PodInfo], queue: str, runtime: float | None,
                  meta: list[Mapping[str, str]], devices: DeviceInventory, *,
                  priority: int | None, max_runtime: float | None, ran_before: float,
                  owner: OwnerRef | None, tier: Tier, native: NativeGroupInfo | None,
                  notices: tuple[str, ...], group_uid: str | None,
                  lost: Shortfall | None) -> RunningGang:
    """The running part of a gang from its *bound* members, with the gang's terms as
    ``build_gang`` read them (*priority*: its native PodGroup's, else its members'
    highest)."""
    per_node: dict[str, list[Resources]] = defaultdict(list)
    for p in bound:
        if p.occupies_node:
            per_node[p.node_name].append(p.requests)
    start = min((p.started_at if p.started_at is not None else p.creation_time) for p in bound)
    checkpoint_text = grouping_terms.annotation(LAST_CHECKPOINT_ANNOTATION, *meta)
    checkpoint: float | None = None
    if checkpoint_text:
        try:
            checkpoint = parse_time(checkpoint_text)
        except ValueError:
            checkpoint = None
    ns, name = gid.split("/", 1)
    roles = grouping_terms.roles(bound, len(bound), devices)
    node_of = {p.uid: p.node_name for p in bound if p.occupies_node}
    members: dict[tuple[str, str], int] = defaultdict(int)
    for r in roles:
        for ref in r.pods:
            if ref.uid in node_of:
                members[(r.name, node_of[ref.uid])] += 1
    gang = Gang(id=gid, uid=bound[0].uid, namespace=ns, name=name, queue=queue,
                roles=roles,
                priority=max(p.priority for p in bound) if priority is None else priority,
                creation_time=start, runtime_estimate=runtime, max_runtime=max_runtime,
                ran_before=ran_before, owner=owner, tier=tier, native=native,
                notices=notices)
    return RunningGang(
        gang=gang, group_uid=group_uid, shortfall=lost,
        allocations=tuple((node, total(res)) for node, res in sorted(per_node.items())),
        start_time=start, last_checkpoint=checkpoint,
        expected_end=start + runtime if runtime is not None else None,
        terminating=any(p.terminating and p.occupies_node for p in bound),
        members=tuple((r, n, c) for (r, n), c in sorted(members.items())),
    )
