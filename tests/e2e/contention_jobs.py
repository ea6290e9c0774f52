"""Contention for a workload its controller runs: queued behind a running gang, then preempted
and resumed (twice), with the time from the eviction to the gang running again measured.

Why a helper of its own: issue 33 found that on an empty cluster the operators work, and
under contention, preemption or ordered start-up some workloads are stranded; so every
operator scenario also runs these steps. The shape is generic: a ``Workload`` is callables
(create it in a queue at a priority, list its live pods), and the steps use only those, the
ops helpers (a Queue, PriorityClasses, the in-process scheduler) and plain pods for the gang
it queues behind and for the preemptors. (h4 writes ``contention.py`` for JobSets, TrainJobs
and PodGroups the same way; the two are meant to merge.)

The cluster is one node with room for the workload exactly, in a Queue that lets a higher
priority preempt a lower one: the blocker (its priority) fills the node first, so the
workload queues; each preemptor (higher) needs the whole node for a few seconds, evicts the
workload whole and finishes, and the workload's controller recreates its pods. With
``node_template`` the blocker and the preemptors claim the node's devices (Dynamic Resource
Allocation) from that ResourceClaimTemplate instead of requesting ``nvidia.com/gpu``, so that
they contend with a workload whose GPUs are device claims.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler.tools.devcluster import dra_driver, rest
from tests.e2e import dra_support as ds
from tests.e2e.cluster_api import SIMULATED_RUNTIME, wait_for
from tests.e2e.live import POOL_LABEL, QUEUE_LABEL, InProcessScheduler, PodWatch
from tests.e2e.live import unschedulable_message as pending_reason
from tests.e2e.ops_support import Ops


@dataclass(frozen=True)
class Workload:
    """What the steps need of a workload: how big its gang is and how to make and see it."""

    name: str
    size: int  # pods its gang runs at once
    gpus: int  # per pod
    create: Callable[[str, str], None]  # (queue, PriorityClass) -> it exists
    pods: Callable[[], list[str]]  # its pods now, neither being deleted nor finished


@dataclass(frozen=True)
class Resume:
    """One preemption, timed on the test's watch (monotonic seconds)."""

    evicted_at: float  # the first of its pods seen being deleted
    recreated_at: float  # the last of its new pods seen created
    running_at: float  # the last of its new pods seen Running
    pods: tuple[str, ...]  # the new pods

    @property
    def recreated_s(self) -> float:
        return self.recreated_at - self.evicted_at

    @property
    def running_s(self) -> float:
        return self.running_at - self.evicted_at

    def describe(self) -> str:
        return (f"eviction -> pods recreated {self.recreated_s:.1f} s, -> gang running again "
                f"{self.running_s:.1f} s")


class TimingWatch(PodWatch):
    """``PodWatch`` that also keeps when each pod was first seen, first seen being deleted
    and first seen Running."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.created: dict[str, float] = {}
        self.deleting: dict[str, float] = {}
        self.running: dict[str, float] = {}

    def __enter__(self) -> TimingWatch:
        super().__enter__()
        return self

    def _handle(self, event: Any, obj: dict[str, Any]) -> None:
        super()._handle(event, obj)
        meta, now = obj["metadata"], time.monotonic()
        with self._lock:
            self.created.setdefault(meta["name"], now)
            if meta.get("deletionTimestamp"):
                self.deleting.setdefault(meta["name"], now)
            if (obj.get("status") or {}).get("phase") == "Running":
                self.running.setdefault(meta["name"], now)

    def earliest(self, times: dict[str, float], names: list[str]) -> float | None:
        """The first of *names* in *times* (None: none there yet)."""
        with self._lock:
            seen = [times[n] for n in names if n in times]
        return min(seen) if seen else None

    def latest(self, times: dict[str, float], names: list[str]) -> float | None:
        """The last of *names* in *times* once all are there (None: not yet)."""
        with self._lock:
            seen = [times[n] for n in names if n in times]
        return max(seen) if len(seen) == len(names) else None


@dataclass
class Contention:
    """One node with room for the workload exactly, a preempting Queue, two priorities."""

    ops: Ops
    workload: Workload
    queue: str
    low: str  # the workload's and the blocker's PriorityClass
    high: str  # the preemptors'
    resumes: list[Resume] = field(default_factory=list)
    #: The ResourceClaimTemplate (the node's every device) the blocker and preemptors claim
    #: from; None: they request ``nvidia.com/gpu``.
    node_template: str | None = None

    @classmethod
    def set_up(cls, ops: Ops, workload: Workload, node_template: str | None = None
               ) -> Contention:
        names = ops.tenant.create_nodes(1, gpus=workload.size * workload.gpus)
        if node_template is not None:  # the fake driver publishes the node's devices
            dra_driver.wait_published(ops.cp.api, names, timeout_s=120)
        queue = ops.queue("q", gpus=1000, preemption={"withinQueue": "LowerPriority"})
        return cls(ops, workload, queue, ops.priority_class("low", 100),
                   ops.priority_class("high", 1000), node_template=node_template)

    @property
    def node_gpus(self) -> int:
        return self.workload.size * self.workload.gpus

    def lone_pod(self, name: str, priority_class: str, runtime_s: float | None = None) -> str:
        """A pod (a gang of one) of this tenant needing the whole node."""
        tenant = self.ops.tenant
        annotations = {SIMULATED_RUNTIME: str(runtime_s)} if runtime_s is not None else {}
        base = (tenant.pod_spec(self.node_gpus) if self.node_template is None else
                ds.claiming_pod_spec({POOL_LABEL: tenant.pool}, tenant.scheduler_name,
                                     template=self.node_template))
        spec = {**base, "priorityClassName": priority_class}
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": name, "labels": {QUEUE_LABEL: self.queue},
                         "annotations": annotations}}
        rest.call(self.ops.cp.core.create_namespaced_pod, self.ops.ns, body)
        return name

    def queued_behind_a_running_gang(self, runner: InProcessScheduler) -> list[str]:
        """The workload created while a gang of its priority fills the node: it waits, whole
        and with a reason, and runs once that gang is gone."""
        tenant, w = self.ops.tenant, self.workload
        blocker = self.lone_pod(f"{w.name}-blocker", self.low)
        wait_for(lambda: tenant.all_bound([blocker]), 60, what="the blocking gang bound")
        w.create(self.queue, self.low)
        pods = wait_for(lambda: w.pods() if len(w.pods()) == w.size else [], 60,
                        what=f"the {w.size} pods of {w.name}")
        for _ in runner.during_cycles(6):
            assert tenant.bound(pods) == [], f"{w.name} bound beside the running gang"
        reasons = wait_for(lambda: [m for n in pods if (m := pending_reason(tenant.pods()[n]))]
                           if len(pods) == w.size else [], 60, what="its pending reasons")
        assert len(reasons) == w.size, reasons
        tenant.delete_pod(blocker)
        self.wait_running(pods, "once the blocking gang is gone")
        return pods

    def wait_running(self, pods: list[str], why: str) -> None:
        tenant = self.ops.tenant
        wait_for(lambda: tenant.all_bound(pods) and set(tenant.phases(pods).values())
                 == {"Running"}, 180, what=f"{self.workload.name} running {why}")

    def preempted_and_resumed(self, watch: TimingWatch, round_: int,
                              in_the_gap: Callable[[], None] | None = None,
                              timeout_s: float = 900.0) -> Resume:
        """A higher-priority gang needing the whole node evicts the workload, runs 2 s and
        ends; the workload's controller recreates its pods, which run again whole.
        *in_the_gap* runs once its evicted pods have ended (say, ``explain``)."""
        w, tenant = self.workload, self.ops.tenant
        before = w.pods()
        assert len(before) == w.size, before
        preemptor = self.lone_pod(f"{w.name}-urgent-{round_}", self.high, runtime_s=2)
        evicted = _seen(lambda: watch.earliest(watch.deleting, before), 120,
                        f"{w.name} evicted for {preemptor}")
        if in_the_gap is not None:  # once the old pods have ended, before new ones exist
            wait_for(lambda: all(n in watch.finished or n in watch.deleted for n in before),
                     120, what=f"{w.name}'s evicted pods ended")
            in_the_gap()
        fresh = wait_for(lambda: [n for n in w.pods() if n not in before]
                         if len([n for n in w.pods() if n not in before]) == w.size else [],
                         timeout_s, interval_s=0.2, what=f"{w.name}'s {w.size} new pods")
        self.wait_running(fresh, f"again after round {round_}")
        created = _seen(lambda: watch.latest(watch.created, fresh), 30, "their creations")
        running = _seen(lambda: watch.latest(watch.running, fresh), 30, "their starts")
        assert tenant.phases([preemptor]) == {preemptor: "Succeeded"}, "ran before the preemptor"
        resume = Resume(evicted, created, running, tuple(fresh))
        self.resumes.append(resume)
        return resume


def _seen(when: Callable[[], float | None], timeout_s: float, what: str) -> float:
    """The time *when* gives once the watch has seen it."""
    found = wait_for(when, timeout_s, what=what)
    assert found is not None
    return found
