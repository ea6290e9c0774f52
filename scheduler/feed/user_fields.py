"""Every annotation and label on users' objects that the scheduler reads, in one table.

Why one table: these are the scheduler's input from people (and from their tools), read
leniently in many places (``grouping``, ``grouping_terms``, ``grouping_jobset``, the node
model). The tests fuzz each of them with extreme and adversarial values (huge, negative, far
future, non-ASCII digits, empty, very long: ``tests/unit/reliability``, ``tests/e2e/
test_fuzz_live.py``), and a test fails when a module defines a key it reads without listing it
here (or in ``WRITTEN``), so a new annotation is fuzzed from the day it is read.
(Queue fields have their table in ``policies.parsing.QUEUE_FIELDS``.)
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.feed import admission, grouping_jobset, grouping_terms
from scheduler.model import hami, nodes, shortfall, workloads


@dataclass(frozen=True, slots=True)
class UserField:
    """One key: an ``annotation`` or a ``label``, the kinds it is read on, a value that reads
    well (the fuzzers' starting point) and what the scheduler does with it."""

    key: str
    where: str  # "annotation" or "label"
    on: tuple[str, ...]  # "Pod", "PodGroup", "Job", "JobSet", "Node"
    example: str
    meaning: str


_WORKLOAD = ("Pod", "PodGroup", "Job")

FIELDS: tuple[UserField, ...] = (
    UserField(workloads.QUEUE_LABEL, "label", (*_WORKLOAD, "JobSet"), "team-a",
              "the gang's queue (grouping_terms.queue_of)"),
    UserField(workloads.EXPECTED_RUNTIME_ANNOTATION, "annotation", (*_WORKLOAD, "JobSet"),
              "2h", "runtime estimate for reservations and backfill (at most 365d)"),
    UserField(workloads.MAX_RUNTIME_ANNOTATION, "annotation", (*_WORKLOAD, "JobSet"),
              "12h", "evicted once it has run this long (its queue's maxRuntimeSeconds caps "
              "it; at most 365d)"),
    UserField(workloads.LAST_CHECKPOINT_ANNOTATION, "annotation", (*_WORKLOAD, "JobSet"),
              "2026-11-30T09:00:00Z", "work lost if preempted is counted from it"),
    UserField(workloads.RUNTIME_SECONDS_ANNOTATION, "annotation", (*_WORKLOAD, "JobSet"),
              "3612.5", "seconds the workload ran in earlier runs, counted against its queue's "
              "maxRuntimeSeconds (written by the scheduler after each run; remove to reset)"),
    UserField(workloads.MIN_MEMBER_ANNOTATION, "annotation", (*_WORKLOAD, "JobSet"), "2",
              "the gang size without a PodGroup"),
    UserField(workloads.ROLE_LABEL, "label", ("Pod",), "worker", "the name of a pod's role"),
    UserField(workloads.TIER_LABEL, "label", _WORKLOAD, "interactive",
              "interactive: considered first in its queue, never preempted by batch gangs "
              "(policies.interactive); anything else: batch"),
    UserField(workloads.USER_LABEL, "label", ("Pod",), "alice",
              "who an interactive gang belongs to, for its queue's per-user caps"),
    UserField(workloads.JUPYTERHUB_USER_LABEL, "label", ("Pod",), "alice",
              "JupyterHub's user label, read when the user label is missing"),
    UserField(workloads.POD_GROUP_LABEL, "label", ("Pod",), "g",
              "the scheduler-plugins PodGroup a pod belongs to"),
    UserField(workloads.VOLCANO_GROUP_ANNOTATION, "annotation", ("Pod",), "g",
              "the Volcano group a pod belongs to"),
    UserField(workloads.JOB_NAME_LABEL, "label", ("Pod",), "train", "the Job of a pod"),
    UserField(workloads.TRAINJOB_NAME_LABEL, "label", ("Pod",), "train",
              "the TrainJob of a pod (views name its gang after it)"),
    UserField(grouping_terms.TOPOLOGY_REQUIRED_ANNOTATION, "annotation", _WORKLOAD,
              "topology.gangscheduler.io/rack", "all members in one domain of this label"),
    UserField(grouping_terms.TOPOLOGY_PREFERRED_ANNOTATION, "annotation", _WORKLOAD,
              "topology.gangscheduler.io/block", "members in as few domains as possible"),
    UserField(grouping_jobset.JOBSET_NAME_LABEL, "label", ("Pod", "Job"), "train",
              "the JobSet of a pod or Job"),
    UserField(workloads.JOBSET_UID_LABEL, "label", ("Pod",), "0b7c",
              "the uid of a pod's JobSet: an eviction's Preempted event goes on the JobSet too"),
    UserField(grouping_jobset.REPLICATED_JOB_LABEL, "label", ("Pod", "Job"), "workers",
              "the replicated Job of a JobSet's pod or Job"),
    UserField(grouping_jobset.GANG_SCOPE_ANNOTATION, "annotation", ("JobSet",), "jobset",
              "one gang per JobSet, or per replicated Job"),
    UserField(shortfall.COMPLETION_INDEX_LABEL, "label", ("Pod",), "0",
              "an Indexed Job pod's rank (which ranks a short gang misses; views)"),
    *(UserField(key, "label", ("Pod",), "0", "a member's rank, shown in views")
      for key in workloads.RANK_LABELS if key != shortfall.COMPLETION_INDEX_LABEL),
    *(UserField(key, "annotation", ("Pod",), "0", "a member's rank, if not a label (views)")
      for key in workloads.RANK_LABELS),
    UserField(admission.OPT_LABEL, "label", ("Pod", "Job", "JobSet"), admission.OPT_OUT,
              "disabled: the admission webhook adds no defaults to this object"),
    UserField(nodes.DEFAULT_POOL_LABEL, "label", ("Node",), "a100", "the node's pool"),
    *(UserField(key, "label", ("Node",), "r1", "a topology level")
      for key in nodes.DEFAULT_TOPOLOGY_LABELS),
    UserField(nodes.HOSTNAME_LABEL, "label", ("Node",), "n1", "the innermost topology level"),
    UserField(nodes.GPU_PRODUCT_LABEL, "label", ("Node",), "NVIDIA-A100-SXM4-80GB",
              "the GPU model, shown in views"),
    UserField(hami.HAMI_REGISTER_ANNOTATION, "annotation", ("Node",),
              '[{"id":"GPU-0","count":10,"devmem":16384,"devcore":100,"type":"A10",'
              '"health":true}]',
              "the GPUs HAMi's device plugin registered: shared by nvidia.com/gpumem / "
              "gpucores asks (scheduler.kube.read.hami_convert)"),
    UserField(hami.HAMI_ALLOCATED_ANNOTATION, "annotation", ("Pod",),
              "GPU-0,NVIDIA,8192,0:;", "the GPU shares a bound pod holds (written by the "
              "scheduler that placed it, read back to count them)"),
)

#: Keys the scheduler writes and never reads as input.
WRITTEN: frozenset[str] = frozenset({workloads.ESTIMATED_START_ANNOTATION,
                                     workloads.ESTIMATE_TIME_ANNOTATION,
                                     # for cluster-autoscaler's scale-down
                                     workloads.SAFE_TO_EVICT_ANNOTATION,
                                     # for HAMi's device plugin, before a share's binding
                                     hami.HAMI_TO_ALLOCATE_ANNOTATION,
                                     hami.HAMI_NODE_ANNOTATION, hami.HAMI_TIME_ANNOTATION,
                                     hami.HAMI_BIND_PHASE_ANNOTATION,
                                     hami.HAMI_BIND_TIME_ANNOTATION})


def on(kind: str, where: str) -> tuple[UserField, ...]:
    """The fields of *where* ("annotation" or "label") read on objects of *kind*."""
    return tuple(f for f in FIELDS if kind in f.on and f.where == where)
