"""The cache's record of Kubernetes' own gang API objects: PodGroups, Workloads and who refers
to whom.

Why apart: a Workload or a Job changes the gangs of the PodGroups made from it (their labels
name the queue, their annotations the runtime), so the cache must know which gangs to rebuild
when one of them changes. This store keeps that index; ``ClusterCache`` marks what it returns
dirty. Not thread-safe on its own: the cache calls it under its lock.
"""

from __future__ import annotations

from scheduler.model.native import NativeGroupInfo, ResolvedGroup, WorkloadInfo


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
