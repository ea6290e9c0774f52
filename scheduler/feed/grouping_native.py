"""What a ``scheduling.k8s.io`` PodGroup (Kubernetes' own gang API) makes of its gang.

Why apart from ``grouping``: the upstream API states in fields what the other sources say in
labels and annotations (the gang size, priority, topology, who may preempt).
``grouping.build_gang`` asks this module
for those terms when a gang's pods name a PodGroup in ``spec.schedulingGroup``; everything
else (roles, partial binds, running gangs) is shared with the other sources.

Rules, each from the API's own documentation:

* ``schedulingPolicy.gang.minCount`` is the gang's minimum. ``basic`` declares no gang: the
  usual rules decide (a Job's parallelism, the min-member annotation, else one). That keeps a
  Job a gang of its parallelism on 1.37, whose Job controller gives every Job a basic PodGroup
  unless ``spec.scheduling`` asks for a gang. Bound members count towards the minimum, so
  a running gang whose minCount grows (1.37 makes it mutable) places the difference
  together, and one whose minCount shrinks needs fewer. minCount "does not affect
  already-scheduled pods": a group with a running member is never rolled back as partly
  bound because its minimum grew. A group the Job controller made for a Job (the
  ``WorkloadWithJob`` gate) never needs more members than the Job has completions still to
  go: an Indexed Job whose ranks 0-2 Succeeded retries rank 3 alone, though minCount is 4.
* ``priority`` (written by the Priority admission plugin from ``priorityClassName``) is the
  gang's priority, pending and running; unset, the members' highest priority is used. So is
  it for a group the Job controller made without a ``priorityClassName``: the controller
  does not copy the pod template's class, so its 0 is admission's default, not the user's.
* ``schedulingConstraints.topology[0].key`` is a *required* topology level.
* ``preemptionPolicy: Never`` (1.37) makes the gang non-preempting, like a member's own.
* ``resourceClaims`` are claims the group's pods share: a pod entry identical to one of them
  uses the group's claim (named, or made from the template for the group), allocated once
  for the whole gang and reserved for the PodGroup (``placement.device_claims``).
* The queue comes from ``gangscheduler.io/queue`` on the PodGroup, its Workload, the Job that
  made it, or the pods (first found).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.model.gangs import TopologyConstraint, TopologyMode
from scheduler.model.native import GROUP, NativeGroupInfo, ResolvedGroup
from scheduler.model.pods import PreemptionPolicy
from scheduler.model.workloads import JobInfo, PodInfo, PodPhase


@dataclass(frozen=True, slots=True)
class NativeTerms:
    """The parts of a gang its PodGroup decides (None: the usual rule applies)."""

    #: None for the ``basic`` policy: the usual rules decide (``grouping_terms.min_member``).
    min_member: int | None
    problem: str | None
    priority: int | None
    topology: TopologyConstraint | None
    preemption_policy: PreemptionPolicy | None
    #: Labels and annotations of the PodGroup and its Workload, in that order.
    labels: tuple[Mapping[str, str], ...]
    annotations: tuple[Mapping[str, str], ...]
    creation_time: float | None
    uid: str | None
    #: False once a member runs: a grown minCount never rolls a running group back.
    may_roll_back: bool


def names_native_group(gid: str, pods: list[PodInfo]) -> bool:
    """Is gang *gid* the ``scheduling.k8s.io`` PodGroup its pods name (``spec.
    schedulingGroup``)? (A JobSet's pods name their Job's group but are the JobSet's gang.)"""
    return any(f"{p.namespace}/{p.pod_group_name}" == gid for p in pods if p.pod_group_name)


def native_terms(gid: str, resolved: ResolvedGroup | None, bound: list[PodInfo],
                 job: JobInfo | None = None) -> NativeTerms:
    """The gang terms of *gid*'s PodGroup; a missing or unsupported group is a problem.
    *job* is the Job that made the group, if a Job did."""
    if resolved is None:
        return NativeTerms(
            min_member=1, labels=(), annotations=(), creation_time=None, uid=None,
            problem=(f"PodGroup {gid} ({GROUP}) does not exist (yet); its pods wait for it so "
                     "that the gang size (schedulingPolicy.gang.minCount) is known"),
            priority=None, topology=None, preemption_policy=None, may_roll_back=True)
    group, workload = resolved.group, resolved.workload
    policy = group.policy
    problem = None
    topology = (TopologyConstraint(policy.topology_key, TopologyMode.REQUIRED)
                if policy.topology_key else None)
    never = policy.preemption_policy is PreemptionPolicy.NEVER
    min_member = max(1, policy.min_count) if policy.min_count is not None else None
    if min_member is not None and job is not None and job.completions is not None:
        min_member = max(1, min(min_member, job.completions - job.succeeded))
    return NativeTerms(
        min_member=min_member,
        problem=problem,
        priority=_priority(group),
        topology=topology,
        preemption_policy=PreemptionPolicy.NEVER if never else None,
        labels=(group.labels, *((workload.labels,) if workload else ())),
        annotations=(group.annotations, *((workload.annotations,) if workload else ())),
        creation_time=group.creation_time,
        uid=group.uid or None,
        may_roll_back=not any(p.phase is PodPhase.RUNNING for p in bound),
    )


def _priority(group: NativeGroupInfo) -> int | None:
    """The group's own priority, or None where its members' should decide (see above)."""
    policy = group.policy
    if group.job_key and not policy.priority_class_name:
        return None
    return policy.priority
