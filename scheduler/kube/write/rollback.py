"""Carry out a plan's rollbacks: release the bound members of partly bound gangs that the
decision core found can no longer be completed (``scheduler.decide.housekeeping`` decides when, and
names the cause; it never does for a transient fault).

Each pod first gets ``DisruptionTarget=True`` (reason ``GangRolledBack``, the cause and the
reason in its message): the condition workload controllers read to tell a disruption from a
failure of the pod's own, so a Job whose ``podFailurePolicy`` ignores ``DisruptionTarget``
replaces the pod without counting it towards its ``backoffLimit``. Only then is the pod
deleted (grace 0, uid-preconditioned). A pod whose condition got no answer is not deleted in
this pass (deleting it bare would cost a Job a counted failure): its gang stays partly bound,
so the next cycle decides the rollback again and the write is tried again. A pod without a
controller is released the same way, and nothing recreates it: that is why the core rolls a
gang back only once completing it has become impossible.

Every pod deleted is counted by cause (``pods_deleted_total``) and logged (``pods_deleted``,
with ``cause``); each gang rolled back gets a ``GangRolledBack`` event on its pods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from scheduler.decide.plan import Rollback
from scheduler.kube.events import EventReason
from scheduler.kube.write.binder import TRANSIENT, Binder
from scheduler.kube.write.status import StatusWriter
from scheduler.model import PodRef
from scheduler.run.metrics import SchedulerMetrics

log = structlog.get_logger("gang_scheduler.rollback")

#: The ``DisruptionTarget`` reason on a pod released by a rollback (its event's reason too).
GANG_ROLLED_BACK = str(EventReason.GANG_ROLLED_BACK)

#: Tells people about a rollback: (gang id, its pods, the message).
Announce = Callable[[str, tuple[PodRef, ...], str], None]


class Releaser:
    """Marks and deletes the bound members of the gangs a plan rolls back."""

    def __init__(self, binder: Binder, statuses: StatusWriter, announce: Announce,
                 metrics: SchedulerMetrics | None = None) -> None:
        self.binder, self.statuses = binder, statuses
        self.announce, self.metrics = announce, metrics

    def roll_back(self, rollbacks: Sequence[Rollback]) -> bool:
        """Release the bound members of each gang; True if some were not released yet (the
        next plan decides the rollback again: a retry is due)."""
        left = [self._release(r) for r in rollbacks]
        return any(left)

    def _release(self, r: Rollback) -> bool:
        keys = self.binder.gang_keys(r.gang_id)
        cause = str(r.cause)
        log.warning("partial_gang_rolled_back", **keys, bound=len(r.pods), cause=cause,
                    reason=r.reason, takeover=r.takeover)
        message = f"gang {r.gang_id} rolled back ({cause}): {r.reason}"
        codes = list(self.binder.executor.map(
            lambda ref: self.statuses.set_disruption_target(ref, GANG_ROLLED_BACK, message),
            r.pods))
        unmarked = [ref for ref, code in zip(r.pods, codes, strict=True) if code in TRANSIENT]
        # Gone or recreated (404, 409): nothing to delete. Refused for good (a 403 without
        # the RBAC to patch pod status): released all the same, without the condition.
        marked = [ref for ref, code in zip(r.pods, codes, strict=True)
                  if code not in TRANSIENT and code not in (404, 409)]
        if unmarked:
            log.warning("rollback_deferred", **keys, cause=cause, pods=len(unmarked),
                        reason="DisruptionTarget not written (no answer): tried again next cycle")
        failures = self.binder.delete_pods(marked, gang=r.gang_id) if marked else []
        for f in failures:
            log.error("rollback_failed", **keys, pod=str(f.pod), reason=f.reason)
        deleted = len(marked) - len(failures)
        if deleted:
            log.info("pods_deleted", **keys, cause=cause, pods=deleted)
            if self.metrics is not None:
                self.metrics.pods_deleted.labels(cause).inc(deleted)
        self.announce(r.gang_id, r.pods, message)
        return bool(unmarked or failures)
