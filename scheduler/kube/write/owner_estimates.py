"""A pending gang's estimated start on the Job that owns its pods, where its user looks.

Why here and not in the actuator: the plan names a gang's pods, not their owner; the cache
knows each pod's ``ownerReferences``. So after each cycle the leader's loop hands the plan
to ``OwnerEstimates.publish``, which writes the ``gangscheduler.io/estimated-start`` (and
``-time``) annotations on the one Job that owns all of a pending gang's pods (a Job's gang,
a JobSet's or TrainJob's child Jobs), through the status writer's cache: written only when
the estimate moves beyond ``same_estimate``'s slack, removed once the gang has none (it
started, or its reservation went). The pods themselves get the same annotations from the
actuator; lone pods and PodGroups' pods have no owning Job and need nothing more.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.decide.plan import CyclePlan
from scheduler.kube.write.status import StatusWriter
from scheduler.kube.write.writer import BackgroundWriter
from scheduler.model.workloads import OwnerRef, PodInfo


class OwnerEstimates:
    """Remembers which gangs' Jobs carry an estimate, so that it is removed when it ends."""

    def __init__(self, statuses: StatusWriter, writer: BackgroundWriter,
                 pods: Callable[[str], list[PodInfo]]) -> None:
        self.statuses, self.writer, self.pods = statuses, writer, pods
        self._jobs: dict[str, OwnerRef] = {}  # gang id -> the Job given an estimate

    def publish(self, plan: CyclePlan) -> None:
        estimates = {gid: r.estimated_start for gid, r in plan.pending.items()
                     if r.estimated_start is not None}
        for gid in [g for g in self._jobs if g not in estimates]:
            self._write(gid, self._jobs.pop(gid), None, plan.now)
        for gid, start in estimates.items():
            job = self._jobs.get(gid) or self._owner(gid)
            if job is not None:
                self._jobs[gid] = job
                self._write(gid, job, start, plan.now)

    def _owner(self, gang_id: str) -> OwnerRef | None:
        owners = {p.owner for p in self.pods(gang_id) if p.owner is not None}
        if len(owners) != 1:
            return None
        owner = next(iter(owners))
        return owner if owner.kind == "Job" else None

    def _write(self, gang_id: str, job: OwnerRef, start: float | None, made: float) -> None:
        ns = gang_id.split("/", 1)[0]
        self.writer.submit(f"job-estimate/{gang_id}", lambda: self.statuses.set_job_estimate(
            ns, job.name, job.uid, start, made))
