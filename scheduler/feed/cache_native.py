"""The cache's record of the objects that lend gangs their size and labels: Jobs, JobSets,
operators' objects (PyTorchJob, MPIJob, RayCluster), and Kubernetes' own gang API objects
(PodGroups, Workloads) with who refers to whom.

Why apart: a Workload or a Job changes the gangs of the PodGroups made from it (their labels
name the queue, their annotations the runtime), so the cache must know which gangs to rebuild
when one of them changes. This store keeps that index; ``ClusterCache`` marks what it returns
dirty. Not thread-safe on its own: the cache calls it under its lock (``WorkloadFeeding``,
the part of ``ClusterCache`` that feeds and reads it).
"""

from __future__ import annotations

import threading

from scheduler.feed import grouping_jobset
from scheduler.feed.cache_failures import FailureLog
from scheduler.model.native import NativeGroupInfo, ResolvedGroup, WorkloadInfo
from scheduler.model.workloads import JobInfo, JobSetInfo, PodInfo, operator_key


class NativeStore:
    """``scheduling.k8s.io`` PodGroups and Workloads by ``namespace/name``."""

    def __init__(self) -> None:
        self.groups: dict[str, NativeGroupInfo] = {}
        self.workloads: dict[str, WorkloadInfo] = {}
        self._referrers: dict[str, set[str]] = {}  # Workload or Job key -> PodGroup keys

    def referrers(self, key: str) -> set[str]:
        """The PodGroups made from Workload or Job *key* (their gangs change with it)."""
        return set(self._referrers.get(key, ()))

    def upsert_group(self, group: NativeGroupInfo) -> None:
        self.delete_group(group.key)
        self.groups[group.key] = group
        for ref in (group.workload_key, group.job_key):
            if ref:
                self._referrers.setdefault(ref, set()).add(group.key)

    def delete_group(self, key: str) -> bool:
        """Forget PodGroup *key*; True if it was known."""
        old = self.groups.pop(key, None)
        if old is None:
            return False
        for ref in (old.workload_key, old.job_key):
            keys = self._referrers.get(ref or "")
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._referrers[ref or ""]
        return True

    def resolve(self, key: str) -> ResolvedGroup | None:
        """PodGroup *key* with its Workload (None: no such PodGroup seen)."""
        group = self.groups.get(key)
        if group is None:
            return None
        workload = self.workloads.get(group.workload_key) if group.workload_key else None
        return ResolvedGroup(group, workload)


class WorkloadFeeding:
    """``ClusterCache``'s methods for the objects that lend gangs their size and labels: Jobs,
    and Kubernetes' own Workloads and PodGroups (a mixin: the cache provides the lock, the
    stores, the dirty set and ``_touch``)."""

    _lock: threading.RLock
    _jobs: dict[str, JobInfo]
    _jobsets: dict[str, JobSetInfo]
    _operators: dict[str, JobInfo]
    _native: NativeStore
    _dirty: set[str]
    _pods: dict[str, PodInfo]
    _failures: FailureLog

    def _touch(self) -> None:
        raise NotImplementedError

    def _index(self, pod: PodInfo) -> None:
        raise NotImplementedError

    def _unindex(self, pod: PodInfo) -> None:
        raise NotImplementedError

    def _job_gangs(self, job: JobInfo) -> set[str]:
        """The gangs *job* sizes: its own, its JobSet's, and the PodGroups it made."""
        by_set = grouping_jobset.set_gang_id(job.namespace, job.labels, self._jobsets)
        by_step = grouping_jobset.step_gang_id(job.namespace, job.labels, self._jobsets)
        return {job.key, *(gid for gid in (by_set, by_step) if gid),
                *self._native.referrers(job.key)}

    def upsert_job(self, job: JobInfo) -> None:
        with self._lock:
            old = self._jobs.get(job.key)
            if old == job:  # a status field the scheduler does not read
                return
            self._jobs[job.key] = job
            self._dirty |= self._job_gangs(job) | (self._job_gangs(old) if old else set())
            self._touch()

    def delete_job(self, key: str) -> None:
        with self._lock:
            old = self._jobs.pop(key, None)
            self._failures.forget_job(key)
            if old is not None:
                self._dirty |= self._job_gangs(old)
                self._touch()

    def upsert_jobset(self, jobset: JobSetInfo) -> None:
        """A JobSet; a change of its spec regroups its pods (rare: a new JobSet, mostly)."""
        with self._lock:
            if self._jobsets.get(jobset.key) == jobset:
                return
            self._jobsets[jobset.key] = jobset
            self._regroup(jobset.key)

    def delete_jobset(self, key: str) -> None:
        with self._lock:
            if self._jobsets.pop(key, None) is not None:
                self._regroup(key)

    def upsert_operator_job(self, kind: str, job: JobInfo) -> None:
        """An operator's object (PyTorchJob, MPIJob, RayCluster) as the Job that sizes the
        gang of the pods it owns, named after it."""
        with self._lock:
            key = operator_key(kind, job.namespace, job.name)
            if self._operators.get(key) == job:  # a status change: nothing it sizes
                return
            self._operators[key] = job
            self._dirty.add(job.key)
            self._touch()

    def delete_operator_job(self, kind: str, key: str) -> None:
        """*key* is the object's ``namespace/name``."""
        with self._lock:
            ns, name = key.split("/", 1)
            if self._operators.pop(operator_key(kind, ns, name), None) is not None:
                self._dirty.add(key)
                self._touch()

    def _regroup(self, jobset: str) -> None:
        """Index again the pods of *jobset*: which gang each is in follows its spec."""
        ns, name = jobset.split("/", 1)
        for pod in list(self._pods.values()):
            if (pod.namespace == ns
                    and pod.labels.get(grouping_jobset.JOBSET_NAME_LABEL) == name):
                self._unindex(pod)  # (both mark the pod's gang, old and new, to rebuild)
                self._index(pod)
        self._touch()

    def upsert_native_group(self, group: NativeGroupInfo) -> None:
        """A ``scheduling.k8s.io`` PodGroup (its pods name it in ``spec.schedulingGroup``)."""
        with self._lock:
            unchanged = self._native.groups.get(group.key) == group
            self._native.upsert_group(group)  # (the newest resourceVersion kept)
            if unchanged:  # e.g. the condition the scheduler wrote
                return
            self._dirty.add(group.key)
            self._touch()

    def delete_native_group(self, key: str) -> None:
        with self._lock:
            if self._native.delete_group(key):
                self._dirty.add(key)
                self._touch()

    def upsert_workload(self, workload: WorkloadInfo) -> None:
        with self._lock:
            if self._native.workloads.get(workload.key) == workload:
                return
            self._native.workloads[workload.key] = workload
            self._dirty |= self._native.referrers(workload.key)
            self._touch()

    def delete_workload(self, key: str) -> None:
        with self._lock:
            if self._native.workloads.pop(key, None) is not None:
                self._dirty |= self._native.referrers(key)
                self._touch()

    def job(self, key: str) -> JobInfo | None:
        """The ``batch/v1`` Job *key* (``namespace/name``), if seen."""
        with self._lock:
            return self._jobs.get(key)

    def jobs(self) -> list[JobInfo]:
        with self._lock:
            return list(self._jobs.values())

    def jobset(self, key: str) -> JobSetInfo | None:
        """The JobSet *key* (``namespace/name``), if seen."""
        with self._lock:
            return self._jobsets.get(key)

    def native_group(self, key: str) -> NativeGroupInfo | None:
        """The ``scheduling.k8s.io`` PodGroup *key* (``namespace/name``), if seen."""
        with self._lock:
            return self._native.groups.get(key)

    def native_groups(self) -> list[NativeGroupInfo]:
        with self._lock:
            return list(self._native.groups.values())
