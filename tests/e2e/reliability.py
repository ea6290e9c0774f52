"""The reliability suite's rig: faults injected into a running pair of schedulers on a dev
cluster of its own, the invariants checked after each one, the figures printed.

Its own cluster because it crashes etcd and the apiserver (the session cluster serves every
other test). Two ``gang-scheduler run`` processes (replicas ``a`` and ``b``, leader election
with a 3 s Lease) talk to the apiserver through a ``CuttableProxy``; the test plays the users,
one gang-scheduled Job per round (kwok finishes its pods after a simulated runtime), and one
fault per round:

- ``kill``: the leader SIGKILLed once the round's first member is bound (mid-bind), restarted;
- ``apiserver`` / ``etcd``: SIGKILLed and started again on the same ports and data;
- ``cut``: every connection through the proxy reset mid-bind (watch streams included);
- ``apiserver-bind``: kube-apiserver SIGKILLed once the round's first member is bound
  (mid-bind), kept down for 2-8 s (an apiserver slow to come back, drawn from the round
  number), restarted; the storm (``storm``) strikes with it every 2-4 rounds;
- ``none``: no fault (the storm's rounds between restarts);
- ``pause``: the leader SIGSTOPped mid-bind past its Lease, resumed once the other replica
  took over: anything it binds after that is a stale write. Every pod carries the stamp of the
  term whose Binding placed it (``scheduler.kube.lead.fence``: the apiserver copies a Binding's
  annotations onto the pod), so a stale write is a pod stamped with the paused term that the
  watch first saw bound after the standby was seen leading (or, as before, a member of a gang
  the paused replica logged bound that the watch first saw bound after the resume). The
  apiserver's leader fence (installed for the replicas' Lease) refuses such binds.

After each fault the round must settle (its gang whole, no gang anywhere partly bound, a
leader) within a deadline; its recovery time runs from the fault to then. Invariants: no
gang partly bound once settled, no node over its allocatable (``capacity``, from a watch), no
pod bound twice (``PodWatch``), no pod lost (every Job completes in the end: a pod a rollback
deleted was recreated and ran), no bind by a leader that no longer owned the Lease. Every fault
here is transient, so no pod may be deleted at all: the figures count the pods the watch saw
deleted while still live, and the pods the replicas logged deleting, per cause
(``pods_deleted``, ``scheduler.kube.write.actuator``).
"""

from __future__ import annotations

import contextlib
import json
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import urllib3
from kubernetes import client

from scheduler.kube.client import connect
from scheduler.kube.lead.fence import LEADER_ANNOTATION, LEASE_ANNOTATION, TERM_ANNOTATION
from scheduler.tools.devcluster import (
    certs,
    kubeconfig,
    procs,
    rest,
    resync,
)
from scheduler.tools.devcluster.cluster import DevCluster
from tests.e2e import capacity, fence_support
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import PodWatch, Tenant
from tests.e2e.live_process import SchedulerProcess
from tests.e2e.ops_support import scrape, value
from tests.e2e.tcp_proxy import CuttableProxy

FAULTS = ("kill", "apiserver", "etcd", "cut", "pause")
#: Faults that strike once the round's first member is bound (mid-bind), where they can.
MID_BIND = ("kill", "cut", "pause", "apiserver-bind")
OUTAGE_S = (2.0, 8.0)  # how long ``apiserver-bind`` keeps kube-apiserver down
LEASE_S = 3.0
LEASE_NAME = "reliability"
SETTLE_S = 120.0  # a generous deadline on a loaded 2-core machine; the figures say how fast
RESYNC_EVERY_S = 20.0  # how long the end waits for the Jobs before a kwok resync
JOB_LABEL = "batch.kubernetes.io/job-name"


def schedule(kills: int, others: int, seed: int = 18) -> list[str]:
    """*kills* SIGKILLs and *others* of each other fault, shuffled (the same for a seed)."""
    faults = ["kill"] * kills + [f for f in FAULTS if f != "kill" for _ in range(others)]
    random.Random(seed).shuffle(faults)
    return faults


def storm(rounds: int, seed: int = 41) -> list[str]:
    """*rounds* rounds with kube-apiserver SIGKILLed mid-bind every 2-4 rounds (the gap drawn
    from the seed) and no fault in the rounds between."""
    gen = random.Random(seed)
    faults = ["none"] * rounds
    i = gen.randint(1, 3)
    while i < rounds:
        faults[i] = "apiserver-bind"
        i += gen.randint(2, 4)
    return faults


@dataclass
class Figures:
    faults: Counter[str] = field(default_factory=Counter)
    recoveries: list[float] = field(default_factory=list)
    by_fault: dict[str, list[float]] = field(default_factory=dict)  # fault -> recoveries
    #: Pods the watch saw deleted while live (not finished), by anyone: the Job controller
    #: deletes a surplus pod it created across an apiserver restart (a base run's g65).
    deleted_seen: list[str] = field(default_factory=list)
    #: Of those, the ones a rollback released (DisruptionTarget, reason GangRolledBack).
    released_seen: list[str] = field(default_factory=list)
    #: Pods the replicas logged deleting, by cause (``pods_deleted`` lines).
    deleted_by_cause: Counter[str] = field(default_factory=Counter)
    mid_bind: int = 0  # faults that found the round's gang partly bound
    fenced: int = 0  # writes the paused leaders' fences refused
    #: Gangs a paused leader logged bound after its pause began (binds sent before it, or
    #: stale ones); of those, ``stale``: a member first seen bound after it resumed.
    logged_late: int = 0
    stale: int = 0  # binds made by a replica that did not own the Lease
    refused_by_apiserver: int = 0  # of ``fenced``: writes the apiserver's fence refused
    resynced: list[str] = field(default_factory=list)  # pods kwok left behind (``finish``)
    violations: list[str] = field(default_factory=list)

    def report(self) -> str:
        rec = sorted(self.recoveries)
        lines = [
            f"faults injected: {sum(self.faults.values())} "
            f"({', '.join(f'{k} {n}' for k, n in sorted(self.faults.items()))})",
            f"faults that landed mid-bind (gang partly bound at the fault): {self.mid_bind}",
            f"recoveries: {len(rec)} of {sum(self.faults.values())}",
        ]
        if rec:
            lines.append(f"recovery time: median {statistics.median(rec):.2f} s, "
                         f"max {rec[-1]:.2f} s")
        for fault, times in sorted(self.by_fault.items()):
            lines.append(f"  {fault}: {len(times)}, median {statistics.median(times):.2f} s, "
                         f"max {max(times):.2f} s")
        causes = ", ".join(f"{c} {n}" for c, n in sorted(self.deleted_by_cause.items()))
        lines.append(f"pods deleted by the scheduler: {sum(self.deleted_by_cause.values())}"
                     f" by cause ({causes or 'none'}); released by a rollback, as the watch saw "
                     f"them: {len(self.released_seen)}; live pods the watch saw deleted by "
                     f"anyone: {len(self.deleted_seen)}"
                     + (f" ({', '.join(self.deleted_seen[:10])})" if self.deleted_seen else ""))
        lines += [f"stale writes by a paused leader: {self.stale} "
                  f"(writes refused by its fence: {self.fenced}, of them by the apiserver's: "
                  f"{self.refused_by_apiserver}; gangs it logged bound after "
                  f"its pause began, their binds sent before it: {self.logged_late - self.stale})",
                  f"kwok stages a resync replayed (writes kwok lost): {len(self.resynced)}"
                  + (f" ({', '.join(self.resynced[:10])})" if self.resynced else ""),
                  f"violations: {len(self.violations)}"]
        lines += [f"  - {v}" for v in self.violations[:20]]
        return "\n".join(lines)


@dataclass
class Rig:
    cp: ControlPlane
    tenant: Tenant
    proxy: CuttableProxy
    replicas: list[SchedulerProcess]
    watch: PodWatch
    figures: Figures = field(default_factory=Figures)
    jobs: list[tuple[str, int]] = field(default_factory=list)  # (name, size)
    say: Callable[[str], None] = print
    lease: tuple[str, str] = ("", "")  # (namespace, name) of the replicas' leader Lease

    def violation(self, text: str) -> None:
        self.figures.violations.append(text)
        self.say(f"[reliability] violation: {text}")

    # Reading the cluster ------------------------------------------------------------------
    def leader(self) -> SchedulerProcess | None:
        for r in self.replicas:
            if not r.alive():
                continue
            with contextlib.suppress(OSError):
                if value(scrape(r.port), "gang_scheduler_is_leader") == 1:
                    return r
        return None

    def by_job(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in self.jobs}
        for pod in self.tenant.pods().values():
            job = pod["metadata"].get("labels", {}).get(JOB_LABEL)
            if job in out:
                out[job].append(pod)
        return out

    def partly_bound(self) -> list[str]:
        """Jobs with some live members bound and others waiting, fewer bound than the gang."""
        sizes = dict(self.jobs)
        found = []
        for job, pods in self.by_job().items():
            live = [p for p in pods if p.get("status", {}).get("phase") not in capacity.TERMINAL
                    and not p["metadata"].get("deletionTimestamp")]
            bound = sum(1 for p in live if p["spec"].get("nodeName"))
            if 0 < bound < sizes[job] and bound < len(live):
                found.append(f"{job} ({bound} of {sizes[job]} bound)")
        return found

    def whole(self, job: str, size: int) -> bool:
        """Every member of the round's gang bound or already finished (``members_done``)."""
        status = rest.call(client.BatchV1Api(self.cp.api).read_namespaced_job, job,
                           self.tenant.namespace).get("status") or {}
        return members_done(self.by_job()[job], int(status.get("succeeded") or 0)) >= size

    # A round ------------------------------------------------------------------------------
    def round(self, i: int, fault: str, size: int, runtime_s: float) -> None:
        job = f"g{i}"
        self.jobs.append((job, size))
        marks = (len(self.cp.capacity.violations) if self.cp.capacity else 0,
                 len(self.watch.rebinds()))
        self.tenant.create_job(job, parallelism=size, gpus=1, runtime_s=runtime_s,
                               backoffLimit=10_000)
        started = self.inject(job, fault)
        if fault != "none":
            self.figures.faults[fault] += 1
        try:
            wait_for(lambda: answered(lambda: self.whole(job, size) and not self.partly_bound()
                                      and self.leader() is not None), SETTLE_S, 0.05,
                     what=f"round {i} ({fault}) settled")
            took = time.monotonic() - started
            self.figures.by_fault.setdefault(fault, []).append(took)
            if fault != "none":
                self.figures.recoveries.append(took)
        except AssertionError:
            self.violation(
                f"round {i} ({fault}) did not settle in {SETTLE_S:.0f} s; partly bound: "
                f"{self.partly_bound()}; leader: {self.leader() is not None}")
        self.check(i, fault, marks)

    def inject(self, job: str, fault: str) -> float:
        """Carry out *fault* (mid-bind where it can be); when it struck (monotonic)."""
        if fault in MID_BIND:
            with contextlib.suppress(AssertionError):  # a fault after the bind still counts
                wait_for(lambda: any(n.startswith(f"{job}-") for n in self.watch.bound_names()),
                         60, 0.002, what=f"{job}'s first member bound")
        struck = time.monotonic()
        if fault == "kill":
            leader = self.leader()
            if leader is not None:
                leader.kill()
                self.count_mid_bind(job)
                leader.start()
        elif fault in ("apiserver", "apiserver-bind", "etcd"):
            name = "etcd" if fault == "etcd" else "kube-apiserver"
            if fault == "apiserver-bind":
                self.count_mid_bind(job)
                self.take_down(name, random.Random(job).uniform(*OUTAGE_S))
            self.cp.cluster.restart(name, log=lambda _: None)
        elif fault == "cut":
            self.count_mid_bind(job)
            self.proxy.cut()
        elif fault == "pause":
            self.pause(job)
        return struck

    def take_down(self, name: str, seconds: float) -> None:
        """SIGKILL a control plane process and leave it down for *seconds* (``restart``
        then starts it again)."""
        st = self.cp.cluster.state
        assert st is not None
        procs.kill(next(p for p in st.processes if p.name == name))
        time.sleep(seconds)

    def count_mid_bind(self, job: str) -> None:
        if any(p.startswith(f"{job} ") for p in self.partly_bound()):
            self.figures.mid_bind += 1

    def pause(self, job: str) -> None:
        leader = self.leader()
        if leader is None:
            return
        mark = leader.log_path.stat().st_size
        term = self.lease_term()  # the term the leader is paused in (the Lease as it is)
        before = fence_counts(leader.port)  # the counters are the process's, since its start
        leader.pause()
        paused = time.monotonic()
        self.count_mid_bind(job)
        others = [r for r in self.replicas if r is not leader]
        try:
            wait_for(lambda: any(value(scrape(r.port), "gang_scheduler_is_leader") == 1
                                 for r in others), 30, 0.1, what="the standby took over")
            took_over = time.monotonic()
        finally:
            leader.resume()
            resumed = time.monotonic()
        # The loop sets the gauge between cycles only: 0 means the cycle the pause cut into
        # has ended, so whatever its stale plan would send has been sent (or refused).
        wait_for(lambda: value(scrape(leader.port), "gang_scheduler_is_leader") == 0, 30, 0.1,
                 what="the resumed replica stepped down")
        after = fence_counts(leader.port)
        self.figures.fenced += after[0] - before[0]
        self.figures.refused_by_apiserver += after[1] - before[1]
        logged = bound_gangs(leader.log_path, mark)
        self.figures.logged_late += len(logged)
        stale = {gang for gang in logged if self.bound_after(gang, resumed)}
        # Tighter, and whatever the paused replica logged: every pod its paused term bound
        # (the stamp the apiserver copies from the Binding onto the pod) that the watch first
        # saw bound after the standby was seen leading, at least a Lease duration after the
        # pause began. (g54, the last red run: a member first seen bound after the resume.)
        late = self.stamped_bound_after(term, took_over)
        for pod, _ in late:
            self.violation(f"stale write: {pod} bound by {term[0]} in term {term[1]}, first "
                           f"seen bound {took_over - paused:.1f}+ s into its pause")
        self.figures.stale += len({g.split("/", 1)[-1] for g in stale} | {j for _, j in late})

    def lease_term(self) -> tuple[str, str]:
        """(holderIdentity, leaseTransitions) of the replicas' Lease, as the stamps spell it."""
        lease = rest.call(client.CoordinationV1Api(self.cp.api).read_namespaced_lease,
                          self.lease[1], self.lease[0])
        spec = lease.get("spec") or {}
        return str(spec.get("holderIdentity") or ""), str(spec.get("leaseTransitions") or 0)

    def stamped_bound_after(self, term: tuple[str, str],
                            moment: float) -> list[tuple[str, str]]:
        with self.watch._lock:
            first = dict(self.watch.first_bound)
            versions = {name: list(v) for name, v in self.watch.seen.items()}
        return stamped_bound_after(first, versions, term, f"{self.lease[0]}/{self.lease[1]}",
                                   moment)

    def bound_after(self, gang: str, moment: float) -> bool:
        """Was a member of *gang* ("ns/name") first seen bound after *moment* (monotonic)?"""
        name = gang.split("/", 1)[-1]
        jobs = [j for j, _ in self.jobs if name == j or name.startswith(f"{j}-")]
        first = dict(self.watch.first_bound)
        return any(t > moment for pod, t in first.items()
                   for j in jobs if pod.startswith(f"{j}-"))

    def check(self, i: int, fault: str, marks: tuple[int, int]) -> None:
        where = f"round {i} ({fault})"
        # A gang may be mid-bind at any moment, also after the round settled (an earlier
        # round's Job recreating what a rollback deleted, bound one pod at a time): a gang
        # left partly bound is one that stays so, not one a single read caught mid-bind.
        with contextlib.suppress(AssertionError):
            wait_for(lambda: answered(lambda: not self.partly_bound()), SETTLE_S, 0.1,
                     what=f"{where}: no gang partly bound")
        for job in self.partly_bound():
            self.violation(f"{where}: {job} left partly bound")
        if self.cp.capacity is not None:
            for v in self.cp.capacity.violations[marks[0]:]:
                self.violation(f"{where}: over-commit: {v}")
        for name, nodes in list(self.watch.rebinds().items())[marks[1]:]:
            self.violation(f"{where}: {name} bound twice: {nodes}")

    def finish(self, timeout_s: float = 300.0) -> None:
        """No pod lost: every Job completes (what a rollback deleted was recreated and ran)."""
        batch = client.BatchV1Api(self.cp.api)

        def incomplete() -> list[str]:
            jobs = rest.call(batch.list_namespaced_job, self.tenant.namespace)["items"]
            return [j["metadata"]["name"] for j in jobs
                    if not any(c.get("type") == "Complete" and c.get("status") == "True"
                               for c in (j.get("status") or {}).get("conditions") or ())]
        # kwok, the kubelet stand-in, can lose a pod's exit in an etcd outage and has no
        # status resync to repair it (``scheduler.tools.devcluster.resync``): stand in for one
        # while waiting, and report what it replayed. A pod the scheduler lost is not
        # something a resync brings back, so it still fails the check.
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            with contextlib.suppress(AssertionError):
                wait_for(lambda: not incomplete(), min(RESYNC_EVERY_S, remaining), 0.5,
                         what="every Job complete")
                break
            for pod, stage in resync.resync(self.cp.api, self.tenant.namespace):
                self.figures.resynced.append(f"{pod} ({stage})")
                self.say(f"[reliability] kwok resync: {pod} was overdue for {stage}")
        left = incomplete()
        if left:
            self.violation(f"pods lost: Jobs never completed: {left}; "
                           f"{self.describe_jobs(left)}")
        for r in self.replicas:
            if r.alive() and "Traceback" in r.log():
                self.violation(f"replica {r.identity}: a traceback in its log")
        self.count_deletions()

    def count_deletions(self) -> None:
        """Every fault here is transient: a pod deleted is a pod a transient fault cost."""
        with self.watch._lock:
            versions = {name: list(v) for name, v in self.watch.seen.items()}
            gone = set(self.watch.deleted)
        self.figures.deleted_seen = deleted_live(versions, gone)
        self.figures.released_seen = [n for n in self.figures.deleted_seen
                                      if released(versions[n])]
        for r in self.replicas:
            for path in sorted(r.workdir.glob(f"scheduler-{r.identity}-*.log")):
                self.figures.deleted_by_cause.update(deletions_logged(path))
        if self.figures.released_seen or self.figures.deleted_by_cause:
            self.violation(f"pods deleted for transient faults: "
                           f"{dict(self.figures.deleted_by_cause)} by cause (the replicas' "
                           f"logs); released as the watch saw them: "
                           f"{self.figures.released_seen[:10]}")

    def describe_jobs(self, names: list[str]) -> str:
        """What an incomplete Job and each of its pods were at the end, to find why next time:
        its status counts, and per pod its phase, node, deletion and finalizers."""
        batch = client.BatchV1Api(self.cp.api)
        pods_of = self.by_job()  # one pod list for every Job described
        out = []
        for name in names:
            job = rest.call(batch.read_namespaced_job, name, self.tenant.namespace)
            status = job.get("status") or {}
            counts = {k: status.get(k) for k in ("active", "ready", "succeeded", "failed",
                                                 "terminating", "uncountedTerminatedPods")}
            pods = [f"{p['metadata']['name']}: {(p.get('status') or {}).get('phase')} on "
                    f"{p['spec'].get('nodeName')}, deleting "
                    f"{p['metadata'].get('deletionTimestamp')}, finalizers "
                    f"{p['metadata'].get('finalizers')}"
                    for p in pods_of.get(name, [])]
            out.append(f"{name} {counts} pods [{'; '.join(pods)}]")
        return " | ".join(out)


def members_done(pods: Sequence[dict[str, Any]], succeeded: int) -> int:
    """How many of a Job's members are bound or finished: its live pods on a node, or, if more,
    the live ones on a node that have not succeeded plus the Job's own count of succeeded pods.
    The count matters because a finished pod may be gone: a rollback that deletes a member as
    it exits leaves it Succeeded, counted by the Job controller, then removed (run 15 at
    a74bbb5: ``g6`` complete 6/6 with 5 pods left, so the round never looked whole)."""
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    bound = [p for p in live if p["spec"].get("nodeName")
             or (p.get("status") or {}).get("phase") == "Succeeded"]
    running = [p for p in bound if (p.get("status") or {}).get("phase") != "Succeeded"]
    return max(len(bound), len(running) + succeeded)


def deleted_live(versions: Mapping[str, Sequence[dict[str, Any]]],
                 gone: Iterable[str] = ()) -> list[str]:
    """The pods deleted before they finished (a Succeeded or Failed pod deleted is nobody's
    loss): the first version with a deletion timestamp had not finished, or, for the pods in
    *gone* (deleted while the watch was down, say), the last version seen had not.
    *versions* and *gone*: ``PodWatch.seen`` and ``PodWatch.deleted``."""
    out = []
    gone = set(gone)
    for name, seen in sorted(versions.items()):
        first = next((v for v in seen if v["metadata"].get("deletionTimestamp")),
                     seen[-1] if name in gone and seen else None)
        if first is not None and (first.get("status") or {}).get("phase") not in \
                capacity.TERMINAL:
            out.append(name)
    return out


def released(versions: Sequence[dict[str, Any]]) -> bool:
    """Did a rollback release this pod (``DisruptionTarget`` with reason GangRolledBack)?"""
    return any(c.get("type") == "DisruptionTarget" and c.get("reason") == "GangRolledBack"
               for v in versions for c in (v.get("status") or {}).get("conditions") or ())


def deletions_logged(log: Path) -> Counter[str]:
    """Pods a replica logged deleting (``pods_deleted``), by cause."""
    counts: Counter[str] = Counter()
    with log.open("rb") as f:
        for line in f:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if event.get("event") == "pods_deleted":
                    counts[str(event.get("cause"))] += int(event.get("pods") or 0)
    return counts


def answered(check: Callable[[], bool]) -> bool:
    """*check*, False while the apiserver does not answer (restarting)."""
    try:
        return check()
    except (OSError, client.ApiException, urllib3.exceptions.HTTPError):
        return False


def bound_gangs(log: Path, since: int) -> list[str]:
    """The gangs a replica logged ``gang_bound`` for after *since* (bytes), before it led
    again. Such a line is only a stale write if a bind went out after the pause: the line is
    written once the cycle's binds returned, so binds sent just before the SIGSTOP are logged
    after it (``Rig.pause`` tells the two apart by when the watch first saw each pod bound)."""
    gangs = []
    with log.open("rb") as f:
        f.seek(since)
        for line in f:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if event.get("event") == "leading":
                    break
                if event.get("event") == "gang_bound" and "latency_s" in event:
                    gangs.append(str(event.get("gang")))
    return gangs


def stamped_bound_after(first_bound: Mapping[str, float],
                        versions: Mapping[str, Sequence[dict[str, Any]]],
                        term: tuple[str, str], lease: str,
                        moment: float) -> list[tuple[str, str]]:
    """(pod, Job) of the pods whose version first seen bound carries *term*'s stamp
    (holder, leaseTransitions) for *lease* and that the watch first saw bound after *moment*
    (monotonic): the stale writes of a replica paused in *term*. *first_bound* and *versions*
    are ``PodWatch.first_bound`` and ``PodWatch.seen``."""
    found = []
    for name, t in sorted(first_bound.items()):
        bound = next((v for v in versions.get(name, ()) if v["spec"].get("nodeName")), None)
        meta = (bound or {}).get("metadata") or {}
        stamp = meta.get("annotations") or {}
        if t > moment and stamp.get(LEASE_ANNOTATION) == lease and \
                (stamp.get(LEADER_ANNOTATION), stamp.get(TERM_ANNOTATION)) == term:
            found.append((name, str((meta.get("labels") or {}).get(JOB_LABEL, name))))
    return found


def fence_counts(port: int) -> tuple[int, int]:
    """(writes fenced, of them by the apiserver) a replica counted since it started."""
    metrics = scrape(port)
    return (int(value(metrics, "gang_scheduler_fenced_writes_total")),
            int(value(metrics, "gang_scheduler_fenced_by_apiserver_total")))


def replica_config(tenant: Tenant, lease_namespace: str) -> str:
    return "\n".join([
        f"defaultQueue: {tenant.queue}", "bindConcurrency: 1", "cycleIntervalSeconds: 0.5",
        "bindBackoffInitialSeconds: 1.0", "bindBackoffMaxSeconds: 5.0",
        "partialGangGraceSeconds: 5.0", "logLevel: info", "leaderElection:",
        "  enabled: true", f"  leaseName: {LEASE_NAME}", f"  leaseNamespace: {lease_namespace}",
        f"  leaseDurationSeconds: {LEASE_S}", "  renewDeadlineSeconds: 2.0",
        "  retryPeriodSeconds: 0.5", ""])


@contextlib.contextmanager
def rig(workdir: Path, nodes: int = 6, say: Callable[[str], None] = print) -> Iterator[Rig]:
    """A dev cluster, a tenant with *nodes* 8-GPU nodes, the proxy and both replicas."""
    cluster = DevCluster(workdir / "cluster", owned=True)
    cluster.up(log=lambda line: say(f"[reliability] {line}"), training_operators=False)
    try:
        with capacity.watching(cluster.kubeconfig, "the reliability cluster") as cap:
            cp = ControlPlane(cluster, cap, False)
            tenant = Tenant.create(cp)
            tenant.create_nodes(nodes, gpus=8)
            api = urlparse(cp.server)
            proxy = CuttableProxy((api.hostname or "127.0.0.1", api.port or 443))
            proxied = kubeconfig.write_admin(workdir / "proxied.kubeconfig", proxy.url,
                                             certs.CertPaths.under(cluster.state_dir / "pki"))
            lease_namespace = cp.new_namespace("lease")
            with contextlib.closing(connect(str(cp.kubeconfig))) as admin:
                fence_support.install(cp, admin, lease_namespace, LEASE_NAME)
            config = replica_config(tenant, lease_namespace)
            replicas = [SchedulerProcess(cp, tenant, workdir, config, identity=name,
                                         kubeconfig=proxied) for name in ("a", "b")]
            try:
                for r in replicas:
                    r.start()
                with PodWatch(cp, tenant.namespace) as watch:
                    yield Rig(cp, tenant, proxy, replicas, watch, say=say,
                              lease=(lease_namespace, LEASE_NAME))
            finally:
                for r in replicas:
                    r.stop()
                proxy.close()
    finally:
        cluster.down(log=lambda _: None)


def run(workdir: Path, faults: list[str], say: Callable[[str], None] = print) -> Figures:
    """Every fault in turn, one round each; the figures (also printed)."""
    gen = random.Random(len(faults))
    with rig(workdir, say=say) as r:
        for i, fault in enumerate(faults):
            r.round(i, fault, size=gen.choice((4, 6, 8)), runtime_s=gen.uniform(1.0, 3.0))
            if (i + 1) % 10 == 0:
                say(f"[reliability] {i + 1} of {len(faults)} rounds, "
                    f"{len(r.figures.violations)} violations")
        r.finish()
        say(r.figures.report())
        return r.figures
