"""Queue status written by the leader: usage per pool, gang counts, shares, and validity.

What ``kubectl get queues`` shows comes from here: the CRD's printer columns read
``allocatedGPUs``, ``nominalGPUs``, ``pendingGangs``, ``admittedGangs``, ``fairShare``,
``usageShare`` and the ``Valid`` condition (with fair share with memory on, the status has
``rememberedGPUHours`` and ``rememberedAt`` too, shown by ``gang-scheduler queues`` and read
back by the next leader: ``scheduler.run.remembered``). Figures
come from each cycle's queue reports (``scheduler.report.queue_report``); the condition from
``LivePolicies``, through ``set_validity``. A second condition, ``QuotaFitsCluster``, says
whether the cluster's pools can honour the queue's quotas (``policies.cluster_check``): False
names each pool no node carries and each quota larger than its pool. A merge patch replaces
the whole ``conditions`` list, so both conditions are written together, whichever of them
changed.

Why so careful about writing: every status write is an etcd write and a watch event for
every Queue watcher. A queue's figures are written only when they changed, at most every
``min_interval`` seconds (the latest value wins; nothing is lost, only coalesced), and
with a JSON merge patch on the status subresource that leaves the keys it does not name (the
``Valid`` condition and ``observedGeneration`` written by the other path) alone. Validity is
written at once: an admin waiting for the verdict on an edit should not wait.

Only the leader writes: a standby keeps the latest validity per queue and writes it when it
takes over, since the old leader may have died before writing it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from scheduler.kube.client import MERGE_PATCH, Requester, TransportError
from scheduler.kube.client import path_segment as seg
from scheduler.kube.write.writer import BackgroundWriter, Retry
from scheduler.model.demand import gpus_of
from scheduler.model.durations import format_time
from scheduler.model.resources import GPU
from scheduler.report.queue_report import QueueReport

log = structlog.get_logger("gang_scheduler.queue_status")

QUEUE_PATH = "/apis/gangscheduler.io/v1alpha1/queues"
Status = dict[str, Any]


def _quantity(resource: str, amount: int) -> int | str:
    """Canonical units back to a Kubernetes quantity (cpu is kept in millicores)."""
    if resource == "cpu" and amount % 1000:
        return f"{amount}m"
    return amount // 1000 if resource == "cpu" else amount


def status_of(report: QueueReport) -> Status:
    """The status fields the scheduler owns for one queue (not the conditions)."""
    pools = []
    for p in report.pools:
        shown = sorted(p.covered | ({GPU} if gpus_of(p.allocated) else set()))
        pools.append({
            "pool": p.pool,
            "allocated": {r: _quantity(r, p.allocated[r]) for r in shown},
            "nominal": {r: _quantity(r, p.nominal[r]) for r in sorted(p.covered)},
            "borrowed": {r: _quantity(r, v) for r, v in sorted(p.borrowed.items())},
        })
    status: Status = {
        "allocatedGPUs": report.allocated_gpus, "nominalGPUs": report.nominal_gpus,
        "pendingGangs": report.pending, "admittedGangs": report.running,
        "fairShare": round(report.fair_share, 4), "usageShare": round(report.usage_share, 4),
        "pools": pools}
    if report.remembered_gpu_hours is not None:
        # Three significant digits: it decays every cycle, and an unrounded figure would be a
        # status write per queue at every interval; rounded, it changes by 0.1% at most every
        # 0.0014 half-lives (two minutes at a one-day half-life). Its time goes with it, and
        # is no change by itself (``publish``).
        status["rememberedGPUHours"] = float(f"{report.remembered_gpu_hours:.3g}")
        if report.remembered_at is not None:
            status["rememberedAt"] = format_time(report.remembered_at)
    if report.budget is not None:
        # Used GPU-hours rounded as above: they grow while its gangs run.
        b = report.budget
        status["budget"] = {"usedGPUHours": float(f"{b.used_gpu_hours:.3g}"),
                            "gpuHours": b.gpu_hours, "period": str(b.period),
                            "resetsAt": format_time(b.resets_at)}
    return status


#: Status keys that never make a write by themselves: they go with the figure they date.
_DATING = ("rememberedAt",)


def _figures(status: Status | None) -> Status | None:
    """*status* without the keys that only date another (``_DATING``)."""
    if status is None:
        return None
    return {k: v for k, v in status.items() if k not in _DATING}


class QueueStatusPublisher:
    def __init__(self, client: Requester, is_leader: Callable[[], bool], *,
                 min_interval: float = 5.0, monotonic: Callable[[], float] = time.monotonic,
                 timeout: tuple[float, float] = (5.0, 30.0), retry: Retry | None = None) -> None:
        self.client, self.is_leader, self.min_interval = client, is_leader, min_interval
        self._monotonic, self.timeout = monotonic, timeout
        self._lock = threading.Lock()
        self._validity: dict[str, Status] = {}  # latest from LivePolicies, per queue
        self._validity_written: dict[str, Status] = {}
        self._figures_written: dict[str, Status] = {}
        self._figures_at: dict[str, float] = {}  # when figures were last submitted
        self._fit: dict[str, Status] = {}  # the QuotaFitsCluster condition last worked out
        self._postponed: float | None = None  # when the first figures postponed become due
        self.writer = BackgroundWriter("queue-status", retry)

    # Validity (from LivePolicies, on the informer thread) ---------------------------------
    def set_validity(self, name: str, status: Status) -> None:
        """``LivePolicies``' ``write_status`` hook: the condition and observedGeneration."""
        with self._lock:
            self._validity[name] = status
        if self.is_leader():
            self._submit_validity(name, status)

    def _submit_validity(self, name: str, status: Status) -> None:
        with self._lock:
            self._validity_written[name] = status  # optimistic; undone if the write fails
            body = self._with_fit(name, status)

        def task() -> None:
            if not self._patch(name, body):
                with self._lock:
                    if self._validity_written.get(name) is status:
                        del self._validity_written[name]  # the next publish retries it
        self.writer.submit(f"valid/{name}", task)

    # Figures (from the leader's loop) -----------------------------------------------------
    def publish(self, reports: Iterable[QueueReport]) -> int:
        """Submit the changed figures that are due; returns how many queues were submitted."""
        now = self._monotonic()
        submitted = 0
        names = set()
        postponed: list[float] = []
        for report in reports:
            names.add(report.name)
            desired = status_of(report)
            with self._lock:
                fit = self._fit_condition(report)
                validity = self._validity.get(report.name)
                if validity is not None:  # else the Valid condition a predecessor wrote stays
                    desired["conditions"] = [*validity.get("conditions", ()), fit]
                same = _figures(self._figures_written.get(report.name)) == _figures(desired)
                at = self._figures_at.get(report.name, float("-inf"))
                if same:
                    continue
                if now - at < self.min_interval:
                    postponed.append(at + self.min_interval)  # written when due: ``due_in``
                    continue
                self._figures_at[report.name] = now
            self.writer.submit(f"figures/{report.name}", self._figures_task(report.name, desired))
            submitted += 1
        with self._lock:
            self._postponed = min(postponed, default=None)
            unwritten = [(n, s) for n, s in self._validity.items()
                         if self._validity_written.get(n) != s]
            for gone in set(self._figures_written) - names:
                self._figures_written.pop(gone, None)
                self._figures_at.pop(gone, None)
                self._fit.pop(gone, None)
        for name, status in unwritten:
            self._submit_validity(name, status)
        return submitted

    def due_in(self) -> float | None:
        """Seconds until figures postponed by ``min_interval`` may be written (<= 0: now;
        None: none postponed): the loop publishes again then, with or without a cycle."""
        with self._lock:
            postponed = self._postponed
        return None if postponed is None else postponed - self._monotonic()

    def _fit_condition(self, report: QueueReport) -> Status:
        """The queue's ``QuotaFitsCluster`` condition; its transition time moves only when its
        verdict or message does, so an unchanged queue is not written again. Under the lock."""
        fits = not report.warnings
        message = ("every quota is within a pool that has nodes" if fits
                   else "; ".join(report.warnings))
        last = self._fit.get(report.name)
        if last is not None and last["message"] == message:
            return last
        if not fits:
            log.warning("queue_quota_unhonourable", queue=report.name, warnings=message)
        condition = {"type": "QuotaFitsCluster", "status": "True" if fits else "False",
                     "reason": "QuotaFits" if fits else "QuotaExceedsCluster",
                     "message": message[:32000],
                     "lastTransitionTime": format_time(time.time())}
        self._fit[report.name] = condition
        return condition

    def _with_fit(self, name: str, validity: Status) -> Status:
        """A validity write that keeps the queue's last QuotaFitsCluster condition. Under
        the lock."""
        fit = self._fit.get(name)
        if fit is None:
            return validity
        return {**validity, "conditions": [*validity.get("conditions", ()), fit]}

    def _figures_task(self, name: str, status: Status) -> Callable[[], None]:
        def task() -> None:
            if self._patch(name, status):
                with self._lock:
                    self._figures_written[name] = status
        return task

    def took_over(self) -> None:
        """This replica just became leader: assume nothing about what is written."""
        with self._lock:
            self._validity_written.clear()
            self._figures_written.clear()
            self._figures_at.clear()

    def flush(self, timeout: float = 10.0) -> bool:
        return self.writer.flush(timeout)

    def close(self) -> None:
        self.writer.flush()
        self.writer.stop()

    def _patch(self, name: str, status: Status) -> bool:
        path = f"{QUEUE_PATH}/{seg(name)}/status"
        try:
            resp = self.client.request("PATCH", path, body={"status": status},
                                       content_type=MERGE_PATCH, timeout=self.timeout)
        except TransportError as exc:
            log.warning("queue_status_failed", queue=name, reason=str(exc))
            return False
        if resp.status == 404:
            return True  # the Queue is gone: nothing left to write
        if not resp.ok:
            log.warning("queue_status_failed", queue=name, status=resp.status,
                        reason=resp.message())
        return resp.ok
