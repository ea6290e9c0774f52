"""The demo's main loop: submit jobs when due, watch what the scheduler does, show it.

Why polling: the view redraws a few times a second anyway, and three lists per tick (demo
pods, nodes, queues) are nothing for the apiserver; a watch would add threads for no gain.
The loop also stands in for the controllers the dev cluster lacks: it creates each job's
PodGroup and pods, and recreates a preempted gang's pods as a Job controller would.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

from rich.console import Console
from rich.live import Live

from scheduler.kube.client import ApiError, KubeClient
from scheduler.tools.demo import frame, scenario, view
from scheduler.tools.demo.track import (
    Event,
    PodObs,
    Tracker,
    observe_pod,
)

PODS = "/api/v1/pods"
NODES = "/api/v1/nodes"
QUEUES = "/apis/gangscheduler.io/v1alpha1/queues"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"
TICK_S = 0.25
SUMMARY_EVERY_S = 10.0


class Driver:
    def __init__(self, client: KubeClient, jobs: Sequence[scenario.JobSpec], speed: float,
                 console: Console, live: bool, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.client, self.speed, self.console, self.live = client, speed, console, live
        self.tracker = Tracker(jobs, speed)
        self.clock = clock
        self.t0 = clock()
        self.log: deque[str] = deque(maxlen=50)
        self.last_summary = 0.0
        self.reserved: dict[str, str] = {}  # reserved job -> its team, estimate not told yet

    def elapsed(self) -> float:
        return self.clock() - self.t0

    # Writes ----------------------------------------------------------------------------
    def _create(self, path: str, body: dict[str, Any]) -> None:
        resp = self.client.request("POST", path, body=body)
        if not resp.ok:
            raise ApiError("POST", path, resp)

    def submit(self, jobs: Sequence[scenario.JobSpec], now: float) -> list[Event]:
        """PodGroups first, then the pods of all `jobs` interleaved, as several users
        submitting at once would look to a scheduler that places pods one by one."""
        batches = []
        for job in jobs:
            progress = self.tracker.jobs[job.name]
            if progress.attempt == 0:
                self._create(PODGROUPS.format(ns=job.team), scenario.pod_group(job))
            batches.append(scenario.pods(job, progress.attempt, progress.remaining, self.speed))
        for i in range(max((len(b) for b in batches), default=0)):
            for batch in batches:
                if i < len(batch):
                    pod = batch[i]
                    self._create(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)
        return [self.tracker.submitted(job.name, now) for job in jobs]

    # Reads -----------------------------------------------------------------------------
    def pods(self) -> list[PodObs]:
        items = self.client.get_json(PODS, {"labelSelector": scenario.JOB_LABEL})["items"]
        return [o for o in (observe_pod(p) for p in items) if o is not None]

    def current_frame(self, pods: list[PodObs]) -> frame.Frame:
        queues = self.client.get_json(QUEUES)["items"]
        nodes = self.client.get_json(NODES)["items"]
        return frame.build(self.elapsed(), self.tracker, queues, nodes, pods, list(self.log))

    # The loop --------------------------------------------------------------------------
    def step(self) -> frame.Frame | None:
        """One tick: submit what is due, observe, resubmit what was preempted; returns the
        frame when the view needs one."""
        now = self.elapsed()
        events = self.submit(self.tracker.due(now), now)
        pods = self.pods()
        changes = self.tracker.update(pods, now)
        events += changes
        preempted = [self.tracker.jobs[e.job].spec for e in changes if e.kind == "preempted"]
        if preempted:
            events += self.submit(preempted, now)
        for e in changes:
            if e.kind == "waiting" and " waits: Reserved" in e.text:
                self.reserved[e.job] = self.tracker.jobs[e.job].spec.team
        events += self._estimates(now)
        for e in events:
            self._emit(e)
        if self.live:
            return self.current_frame(pods)
        if now - self.last_summary >= SUMMARY_EVERY_S:
            self.last_summary = now
            self.console.print(f"[{now:6.1f}s] {view.summary_line(self.current_frame(pods))}",
                               highlight=False, markup=False, soft_wrap=True)
        return None

    def _estimates(self, now: float) -> list[Event]:
        """The estimated start of each newly reserved job, read from its PodGroup's
        ``status.estimatedStart`` (the scheduler writes it there, not in the reason), once
        it is written; told once per reservation."""
        from scheduler.kube.oneshot import status_time

        events = []
        for name, team in list(self.reserved.items()):
            if self.tracker.jobs[name].started_at is not None:
                del self.reserved[name]
                continue
            resp = self.client.request("GET", f"{PODGROUPS.format(ns=team)}/{name}")
            start = status_time(resp.json()) if resp.ok else None
            if start is not None:
                del self.reserved[name]
                events.append(Event(now, name, "estimated", f"{name} estimated to start in "
                                    f"{max(0.0, start - time.time()):.0f}s (its PodGroup's "
                                    "status.estimatedStart)"))
        return events

    def _emit(self, event: Event) -> None:
        line = f"[{event.at:6.1f}s] {event.text}"
        self.log.append(line)
        if not self.live:
            self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def run(self, timeout_s: float) -> bool:
        """Until every job finished (True) or `timeout_s` passed (False)."""
        live = (Live(console=self.console, refresh_per_second=8, transient=False)
                if self.live else nullcontext())
        with live as display:
            while True:
                shown = self.step()
                if display is not None and shown is not None:
                    display.update(view.render(shown))
                if self.tracker.finished():
                    return not any(p.failed for p in self.tracker.jobs.values())
                if self.elapsed() > timeout_s:
                    return False
                time.sleep(TICK_S)
