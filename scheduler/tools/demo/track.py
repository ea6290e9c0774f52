"""What happened to each demo job, worked out from what the apiserver shows.

Why pure: the tracker is fed plain pod observations and the time, and answers with events and
with what to submit next. It never talks to the cluster, so the story logic (when a job is
due, when a gang counts as started, that a vanished running gang was preempted and must be
resubmitted with the work it had left) is unit-tested without one.

Times are demo seconds (wall time since the demo started); runtimes in the scenario are at
speed 1, so the work a gang did before a preemption is ``elapsed * speed``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.tools.demo import scenario
from scheduler.tools.demo.scenario import JobSpec


@dataclass(frozen=True, slots=True)
class PodObs:
    """One pod of the demo, as much of it as the tracker and the view need."""

    name: str
    job: str
    attempt: int
    team: str
    node: str  # "" while pending
    phase: str
    gpus: int
    deleting: bool = False
    message: str = ""  # PodScheduled=False message, or the DisruptionTarget message


def observe_pod(pod: Mapping[str, Any]) -> PodObs | None:
    """A demo pod from its JSON (None for pods the demo did not create)."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    labels = meta.get("labels") or {}
    job = labels.get(scenario.JOB_LABEL)
    if not job:
        return None
    gpus = sum(int((c.get("resources") or {}).get("requests", {}).get(scenario.GPU, 0))
               for c in spec.get("containers") or ())
    message = ""
    for c in status.get("conditions") or ():
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            message = str(c.get("message") or "")
            break
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            message = str(c.get("message") or "")
    return PodObs(str(meta["name"]), str(job), int(labels.get(scenario.ATTEMPT_LABEL, 0)),
                  str(meta.get("namespace", "")), str(spec.get("nodeName") or ""),
                  str(status.get("phase") or "Pending"), gpus,
                  bool(meta.get("deletionTimestamp")), message)


@dataclass(frozen=True, slots=True)
class Event:
    at: float
    job: str
    kind: str  # submitted, waiting, estimated, started, preempted, finished, failed
    text: str


@dataclass
class JobProgress:
    spec: JobSpec
    attempt: int = 0
    submitted_at: float | None = None  # first submission
    attempt_at: float | None = None  # current attempt's submission
    first_started_at: float | None = None
    started_at: float | None = None  # current attempt, all members bound
    finished_at: float | None = None
    failed: bool = False
    done_before: float = 0.0  # speed-1 seconds of work finished by earlier attempts
    preemptions: list[tuple[float, str]] = field(default_factory=list)  # (at, message)
    partial_since: float | None = None
    longest_partial: float = 0.0  # seconds some but not all members were seen bound
    reason: str = ""
    disruption: str = ""
    pods: tuple[PodObs, ...] = ()

    @property
    def state(self) -> str:
        if self.failed:
            return "Failed"
        if self.finished_at is not None:
            return "Done"
        if self.started_at is not None:
            return "Running"
        if self.attempt_at is None:
            return "Not yet"
        return "Requeued" if self.attempt else "Waiting"

    @property
    def remaining(self) -> float:
        """Speed-1 seconds of work left for the next attempt (at least a second)."""
        return max(1.0, self.spec.runtime - self.done_before)


class Tracker:
    def __init__(self, jobs: Iterable[JobSpec], speed: float) -> None:
        self.speed = speed
        self.jobs: dict[str, JobProgress] = {j.name: JobProgress(j) for j in jobs}

    # Submissions ------------------------------------------------------------------------
    def due(self, now: float) -> list[JobSpec]:
        """Jobs never submitted whose triggers all happened at least `delay` ago."""
        ready = []
        for p in self.jobs.values():
            if p.submitted_at is not None:
                continue
            times = [self._when(t) for t in p.spec.after]
            if any(t is None for t in times):
                continue
            since = max((t for t in times if t is not None), default=0.0)
            if now >= since + p.spec.delay / self.speed:
                ready.append(p.spec)
        return ready

    def _when(self, trigger: scenario.Trigger) -> float | None:
        p = self.jobs[trigger.job]
        return {"submitted": p.submitted_at, "started": p.first_started_at,
                "finished": p.finished_at}[trigger.event]

    def submitted(self, name: str, now: float) -> Event:
        p = self.jobs[name]
        resumed = p.submitted_at is not None
        if not resumed:
            p.submitted_at = now
        p.attempt_at, p.started_at, p.reason = now, None, ""
        s = p.spec
        text = (f"resubmitted {name} (attempt {p.attempt + 1}, {p.remaining:.0f}s of work left)"
                if resumed else f"submitted {name}: {s.team}, {s.shape} GPUs on {s.pool}"
                + (f" ({s.story})" if s.story else ""))
        return Event(now, name, "submitted", text)

    # Observations -----------------------------------------------------------------------
    def update(self, pods: Iterable[PodObs], now: float) -> list[Event]:
        """Fold one poll of the demo's pods in; returns what changed. A job whose running gang
        lost pods before finishing comes back as a ``preempted`` event and moves to its next
        attempt: the caller resubmits it with ``remaining`` work."""
        by_job: dict[str, list[PodObs]] = {}
        for pod in pods:
            by_job.setdefault(pod.job, []).append(pod)
        events: list[Event] = []
        for name, p in self.jobs.items():
            if p.attempt_at is None or p.finished_at is not None:
                continue
            current = tuple(o for o in by_job.get(name, ()) if o.attempt == p.attempt)
            p.pods = current
            events += self._update_job(p, current, now)
        return events

    def _update_job(self, p: JobProgress, pods: tuple[PodObs, ...], now: float) -> list[Event]:
        name, size = p.spec.name, p.spec.workers
        live = [o for o in pods if not o.deleting]
        bound = sum(1 for o in live if o.node)
        p.disruption = next((o.message for o in pods if o.deleting and o.message),
                            p.disruption)
        if p.started_at is not None:
            if sum(1 for o in live if o.phase == "Succeeded") == size:
                p.finished_at = now
                return [Event(now, name, "finished", f"finished {name} "
                              f"(ran {now - p.started_at:.0f}s)")]
            if any(o.phase == "Failed" for o in live):
                p.failed, p.finished_at = True, now
                return [Event(now, name, "failed", f"{name} failed: a pod was rejected")]
            if len(live) < size:
                ran = now - p.started_at
                p.done_before += ran * self.speed
                p.preemptions.append((now, p.disruption))
                p.attempt += 1
                p.started_at, p.attempt_at, p.pods = None, None, ()
                by = f" ({short_reason(p.disruption)})" if p.disruption else ""
                return [Event(now, name, "preempted",
                              f"preempted {name} after {ran:.0f}s: whole gang evicted{by}")]
            return []
        if p.partial_since is not None:  # measured up to this poll, whatever it shows
            p.longest_partial = max(p.longest_partial, now - p.partial_since)
        if 0 < bound < size:
            p.partial_since = p.partial_since if p.partial_since is not None else now
        else:
            p.partial_since = None
        if len(live) == size and bound == size:
            p.started_at = now
            if p.first_started_at is None:
                p.first_started_at = now
            assert p.attempt_at is not None
            nodes = sorted({o.node for o in live})
            return [Event(now, name, "started", f"started {name}: all {size} bound at once on "
                          f"{', '.join(nodes)} (waited {now - p.attempt_at:.0f}s)")]
        reason = next((o.message for o in live if o.message), "")
        if not reason or reason.startswith("WaitingForMembers"):
            return []
        changed = reason_key(reason) != reason_key(p.reason)
        p.reason = reason
        if changed:
            return [Event(now, name, "waiting", f"{name} waits: {compact_reason(reason)}")]
        return []

    # Progress ---------------------------------------------------------------------------
    def finished(self) -> bool:
        return all(p.finished_at is not None for p in self.jobs.values())

    def counts(self) -> tuple[int, int]:
        done = sum(1 for p in self.jobs.values() if p.finished_at is not None)
        return done, len(self.jobs)


def reason_key(message: str) -> str:
    """A pending reason without what changes as other gangs come and go (queue position), so
    the log says when the wait changes, not every time the scheduler re-evaluates it."""
    return re.sub(r" \(#\d+ in queue order\)", "", compact_reason(message))


_KIND = re.compile(r"^(\w+)(?: \(#\d+ in queue order\))?:")
_NEEDS = re.compile(r"queue (\S+) in pool (\S+): needs (\d+) nvidia\.com/gpu, (-?\d+) available")
_STARTS = re.compile(r"reserved (\d+) node\(s\) and its quota")
_BEHIND = re.compile(r"reserved for (\S+?)(?: and for |[ :;,]|$)")


def compact_reason(message: str) -> str:
    """The scheduler's pending reason in a few words for a table cell: its kind, the GPUs
    the queue needs and has available, and the reservation it has or waits behind; any
    other reason is cut to its first clause. Negative availability (quota held for a
    reservation) shows as 0."""
    kind = _KIND.match(message)
    needs = _NEEDS.search(message)
    if not kind or not needs:
        return short_reason(message)
    queue, pool, wanted, available = needs.groups()
    parts = [f"{kind.group(1)}: needs {wanted} {pool} GPUs, {max(0, int(available))} "
             f"available to {queue}"]
    if starts := _STARTS.search(message):
        parts.append(f"reserved {starts.group(1)} node(s)")
    elif behind := _BEHIND.search(message):
        parts.append(f"behind the reservation of {behind.group(1)}")
    if "can never be admitted" in message:
        parts.append("can never be admitted with this quota")
    return "; ".join(parts)


def short_reason(message: str, limit: int = 110) -> str:
    """The first clause of a pending reason, for a table cell or a log line."""
    text = message.split("; ")[0].strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
