"""Turn trace jobs into the pods and pod groups the scheduler observes, and nodes into nodes.

The simulator feeds the *same* cache and gang builder as the live scheduler, so a job must
look exactly like what a user would submit: pods with a queue label, a PodGroup for any job
of more than one pod, an expected-runtime annotation when estimates are enabled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.model import (
    GPU_PRODUCT_LABEL,
    Node,
    NodeLabelConfig,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodRequirements,
    Resources,
    SelectorOperator,
    Taint,
    TaintEffect,
    Tier,
)
from scheduler.model.constraints import DeviceClaimUse, PodConstraints
from scheduler.model.demand import gpus_of
from scheduler.model.devices import ClaimTemplate
from scheduler.model.resources import GPU
from scheduler.model.workloads import (
    EXPECTED_RUNTIME_ANNOTATION,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    ROLE_LABEL,
    TIER_LABEL,
    USER_LABEL,
    PodGroupInfo,
    PodInfo,
)
from scheduler.world import clusterspec
from simulator import claims
from simulator.trace import TraceJob, TraceRole

#: Seconds between the creations of consecutive pods of one job.
POD_CREATION_SPACING = 0.001


def nodes_from_spec(spec: clusterspec.ClusterSpec,
                    label_config: NodeLabelConfig | None = None) -> list[Node]:
    """Model nodes for a cluster description: the same names and labels as the dev cluster.

    The nodes of a pool whose GPUs are devices (``ClusterSpec.device_pools``) have no
    ``nvidia.com/gpu``: their GPUs are in their ResourceSlices (``simulator.devices``)."""
    config = label_config or NodeLabelConfig(pool_label=spec.pool_label,
                                             topology_labels=tuple(spec.topology_labels))
    device_pools = spec.device_pools()
    return [
        Node.build(d.name, Resources.parse(
                       {k: v for k, v in d.allocatable.items()
                        if k != GPU or d.pool not in device_pools}),
                   labels=d.labels,
                   taints=tuple(Taint(t.key, t.value, TaintEffect(t.effect)) for t in d.taints),
                   config=config)
        for d in spec.nodes()
    ]


@dataclass(frozen=True, slots=True)
class JobObjects:
    """What submitting one trace job creates: pods, a PodGroup, and the ResourceClaimTemplates
    its pods that claim GPUs as devices name (one per such role; jobs alike share them)."""

    pods: tuple[PodInfo, ...]
    group: PodGroupInfo | None
    templates: tuple[ClaimTemplate, ...] = ()


def _requirements(role: TraceRole, template: ClaimTemplate | None) -> PodRequirements:
    """A pod's requests: its GPUs as ``nvidia.com/gpu``, or with *template* as one claim
    from it. The GPU models stay a node affinity either way (the same nodes are candidates)."""
    gpus = 0 if template is not None else role.gpus
    requests = Resources.of(gpu=gpus, cpu=role.cpu_millis, memory=role.memory_bytes)
    terms: tuple[NodeSelectorTerm, ...] = ()
    if role.gpu_models:
        terms = (NodeSelectorTerm((NodeSelectorRequirement(
            GPU_PRODUCT_LABEL, SelectorOperator.IN, tuple(sorted(role.gpu_models))),)),)
    if template is None:
        return PodRequirements(requests=requests, affinity_terms=terms)
    uses = (DeviceClaimUse(claims.CLAIM_ENTRY, template=template.name),)
    return PodRequirements(requests=requests, affinity_terms=terms,
                           constraints=PodConstraints(device_claims=uses))


def job_objects(job: TraceJob, *, scheduler_name: str, now: float,
                runtime_estimate: float | None) -> JobObjects:
    """Pods (and a PodGroup if the job has several pods) for *job*, created at *now*."""
    namespace = job.queue
    multi = job.total_pods > 1
    labels = {QUEUE_LABEL: job.queue}
    if job.interactive:
        labels[TIER_LABEL] = Tier.INTERACTIVE.value
    if job.user:
        labels[USER_LABEL] = job.user
    if multi:
        labels[POD_GROUP_LABEL] = job.job_id
    annotations = ({EXPECTED_RUNTIME_ANNOTATION: str(int(runtime_estimate))}
                   if runtime_estimate is not None else {})
    pods: list[PodInfo] = []
    templates: list[ClaimTemplate] = []
    created = now
    for role in job.roles:
        template = (claims.template_for(namespace, role.gpus, role.gpu_models)
                    if role.devices else None)
        if template is not None:
            templates.append(template)
        req = _requirements(role, template)
        role_labels = {**labels, ROLE_LABEL: role.name}
        for i in range(role.count):
            name = f"{job.job_id}-{role.name}-{i}" if multi else job.job_id
            made = (((claims.CLAIM_ENTRY, claims.claim_name(name)),)
                    if template is not None else ())
            pods.append(PodInfo(
                uid=f"{job.job_id}/{role.name}/{i}", namespace=namespace, name=name,
                requirements=req, scheduler_name=scheduler_name, priority=job.priority,
                creation_time=created, labels=role_labels, annotations=annotations,
                claim_statuses=made,
            ))
            # A job controller creates pods one after another; pods of jobs submitted together
            # interleave, which is what lets one-pod-at-a-time scheduling split both jobs.
            created += POD_CREATION_SPACING
    group = (PodGroupInfo(namespace=namespace, name=job.job_id, uid=f"pg/{job.job_id}",
                          min_member=job.min_pods or job.total_pods, creation_time=now,
                          labels=labels,
                          annotations=annotations)
             if multi else None)
    return JobObjects(pods=tuple(pods), group=group, templates=tuple(templates))


def gang_id_of(job: TraceJob) -> str:
    """The gang id the scheduler will give this job's pods (for a gang policy)."""
    return f"{job.queue}/{job.job_id}"


def total_gpus(nodes: Iterable[Node]) -> int:
    return sum(gpus_of(n.allocatable) for n in nodes)
