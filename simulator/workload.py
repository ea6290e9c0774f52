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
)
from scheduler.model.demand import gpus_of
from scheduler.model.workloads import (
    EXPECTED_RUNTIME_ANNOTATION,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    ROLE_LABEL,
    PodGroupInfo,
    PodInfo,
)
from scheduler.world import clusterspec
from simulator.trace import TraceJob, TraceRole

#: Seconds between the creations of consecutive pods of one job.
POD_CREATION_SPACING = 0.001


def nodes_from_spec(spec: clusterspec.ClusterSpec,
                    label_config: NodeLabelConfig | None = None) -> list[Node]:
    """Model nodes for a cluster description: the same names and labels as the dev cluster."""
    config = label_config or NodeLabelConfig(pool_label=spec.pool_label,
                                             topology_labels=tuple(spec.topology_labels))
    return [
        Node.build(d.name, Resources.parse(d.allocatable), labels=d.labels,
                   taints=tuple(Taint(t.key, t.value, TaintEffect(t.effect)) for t in d.taints),
                   config=config)
        for d in spec.nodes()
    ]


@dataclass(frozen=True, slots=True)
class JobObjects:
    """What submitting one trace job creates."""

    pods: tuple[PodInfo, ...]
    group: PodGroupInfo | None


def _requirements(role: TraceRole) -> PodRequirements:
    requests = Resources.of(gpu=role.gpus, cpu=role.cpu_millis, memory=role.memory_bytes)
    terms: tuple[NodeSelectorTerm, ...] = ()
    if role.gpu_models:
        terms = (NodeSelectorTerm((NodeSelectorRequirement(
            GPU_PRODUCT_LABEL, SelectorOperator.IN, tuple(sorted(role.gpu_models))),)),)
    return PodRequirements(requests=requests, affinity_terms=terms)


def job_objects(job: TraceJob, *, scheduler_name: str, now: float,
                runtime_estimate: float | None) -> JobObjects:
    """Pods (and a PodGroup if the job has several pods) for *job*, created at *now*."""
    namespace = job.queue
    multi = job.total_pods > 1
    labels = {QUEUE_LABEL: job.queue}
    if multi:
        labels[POD_GROUP_LABEL] = job.job_id
    annotations = ({EXPECTED_RUNTIME_ANNOTATION: str(int(runtime_estimate))}
                   if runtime_estimate is not None else {})
    pods: list[PodInfo] = []
    created = now
    for role in job.roles:
        req = _requirements(role)
        role_labels = {**labels, ROLE_LABEL: role.name}
        for i in range(role.count):
            name = f"{job.job_id}-{role.name}-{i}" if multi else job.job_id
            pods.append(PodInfo(
                uid=f"{job.job_id}/{role.name}/{i}", namespace=namespace, name=name,
                requirements=req, scheduler_name=scheduler_name, priority=job.priority,
                creation_time=created, labels=role_labels, annotations=annotations,
            ))
            # A job controller creates pods one after another; pods of jobs submitted together
            # interleave, which is what lets one-pod-at-a-time scheduling split both jobs.
            created += POD_CREATION_SPACING
    group = (PodGroupInfo(namespace=namespace, name=job.job_id, uid=f"pg/{job.job_id}",
                          min_member=job.total_pods, creation_time=now, labels=labels,
                          annotations=annotations)
             if multi else None)
    return JobObjects(pods=tuple(pods), group=group)


def gang_id_of(job: TraceJob) -> str:
    """The gang id the scheduler will give this job's pods (for a gang policy)."""
    return f"{job.queue}/{job.job_id}"


def total_gpus(nodes: Iterable[Node]) -> int:
    return sum(gpus_of(n.allocatable) for n in nodes)
