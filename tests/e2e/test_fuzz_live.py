"""Objects no test wrote, through the real apiserver to a running scheduler.

The hypothesis strategies of ``tests/unit/reliability/strategies.py`` (pods, PodGroups, Jobs
and Queues damaged the ways real clusters damage them, every annotation, label and Queue field
the scheduler reads, from its own lists, set to values users write and to extreme and
adversarial junk) are sent to the apiserver; what it accepts reaches a running in-process
scheduler through its informers. Then: no cycle raised, the scheduler still runs, every
accepted pod of this scheduler that is not bound says why (a ``PodScheduled=False`` message or
a Warning event naming it: ``InvalidObject``, ``InvalidAnnotation``, ``FailedScheduling``),
every accepted Queue has a ``Valid`` condition, with a message when False, each failure found
(an object or annotation refused, a status write that failed) is logged once, ``explain`` of
every gang, the views and the dashboard (over HTTP) show no traceback and no absurd time, and
a well-formed gang created after them all is still scheduled. The figures are printed.

Each object is made safe for the shared session cluster first: its own name, this test's
namespace, schedulerName and pool (a fuzzed pod may not land on another test's nodes), no
owner references (the garbage collector would delete the pods), no priority or overhead
(admission needs PriorityClasses and RuntimeClasses), Queues admitting only this
namespace (and deleted at the end), Jobs of at most 3 of this tenant's pods (without GPUs).
``GANG_SCHEDULER_FUZZ_LIVE`` objects (default 60) in the default run, 10,000 in the
reliability run (``-m reliability``, docs/operations.md).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client
from structlog.testing import capture_logs

from scheduler.cli.explain import explain_text
from scheduler.kube.client import KubeClient, connect
from scheduler.kube.write.writer import BackgroundWriter
from scheduler.model.workloads import JOB_NAME_LABEL
from scheduler.run.serve import serve
from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import (
    POOL_LABEL,
    QUEUE_LABEL,
    QUEUES,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)
from tests.unit.reliability import sanity
from tests.unit.reliability import strategies as fuzz

pytestmark = pytest.mark.e2e

COUNT = int(os.environ.get("GANG_SCHEDULER_FUZZ_LIVE", "60"))
OBJECTS = st.one_of(fuzz.pods(), fuzz.pods(), fuzz.podgroups(), fuzz.queues(), fuzz.jobs())


@dataclass
class Sent:
    """What was sent: accepted (by kind and name) and refused (with the apiserver's reason)."""

    accepted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    pods: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)

    def send(self, api: KubeClient, tenant: Tenant, obj: dict[str, Any]) -> None:
        """POST the raw JSON (the generated client would refuse much of it before sending)."""
        kind, name = obj["kind"], obj["metadata"]["name"]
        ns = f"/namespaces/{tenant.namespace}"
        path = {"Queue": "/apis/gangscheduler.io/v1alpha1/queues",
                "PodGroup": f"/apis/scheduling.x-k8s.io/v1alpha1{ns}/podgroups",
                "Job": f"/apis/batch/v1{ns}/jobs", "Pod": f"/api/v1{ns}/pods"}[kind]
        resp = api.request("POST", path, body=obj)
        if not resp.ok:
            self.refused.append(f"{kind} {name}: HTTP {resp.status}: {resp.message()[:160]}")
            return
        self.accepted.append(f"{kind} {name}")
        {"Queue": self.queues, "Pod": self.pods, "Job": self.jobs}.get(kind, []).append(name)


def sanitized(obj: dict[str, Any], tenant: Tenant, n: int) -> dict[str, Any]:
    """*obj* made safe for the shared cluster (see the module docstring), its damage kept."""
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "Pod"
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    for key in ("uid", "resourceVersion", "creationTimestamp", "ownerReferences"):
        meta.pop(key, None)
    meta["name"] = f"fz-{tenant.pool[-8:]}-{n}" if kind == "Queue" else (
        str(meta.get("name")) if kind == "PodGroup" and meta.get("name") in ("train", "g")
        else f"fz-{n}")
    meta["namespace"] = tenant.namespace
    obj["metadata"] = meta
    spec: dict[str, Any] = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    if kind == "Queue":
        spec["namespaces"] = [tenant.namespace]
        obj["kind"], obj["apiVersion"] = "Queue", "gangscheduler.io/v1alpha1"
    elif kind == "PodGroup":
        obj["kind"], obj["apiVersion"] = "PodGroup", "scheduling.x-k8s.io/v1alpha1"
    elif kind == "Job":  # the fuzzed Job's metadata and counts; this tenant's pods, few
        obj["kind"], obj["apiVersion"] = "Job", "batch/v1"
        for key in ("selector", "manualSelector"):
            spec.pop(key, None)
        for key in ("parallelism", "completions"):
            value = spec.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 3:
                spec[key] = 3
        spec["template"] = {"metadata": {"labels": {QUEUE_LABEL: tenant.queue}},
                            "spec": tenant.pod_spec(0)}  # no GPU: the good gang's stay free
    else:
        obj["kind"], obj["apiVersion"] = "Pod", "v1"
        spec["schedulerName"] = tenant.scheduler_name
        spec["nodeSelector"] = {POOL_LABEL: tenant.pool}
        for key in ("nodeName", "priority", "priorityClassName", "overhead"):
            spec.pop(key, None)
    obj["spec"] = spec
    obj.pop("status", None)
    return obj


def drain(writer: BackgroundWriter, stall_s: float = 60.0) -> None:
    """Wait until every write submitted so far ran. Its backlog grows with the objects sent
    (10,000 make minutes of writes on a loaded machine), so what fails is a writer that
    finished no task for *stall_s*, not one that is merely slower than a fixed deadline."""
    progress, since = writer.finished, time.monotonic()
    while not writer.flush(1.0):
        if writer.finished != progress:
            progress, since = writer.finished, time.monotonic()
        assert time.monotonic() - since < stall_s, (
            f"the status writer finished no task for {stall_s:.0f} s")


@pytest.fixture
def sent(control_plane: ControlPlane) -> Iterator[Sent]:
    out = Sent()
    yield out
    for name in out.queues:  # cluster-scoped: no other test may meet them
        with contextlib.suppress(client.ApiException):
            rest.call(control_plane.custom.delete_cluster_custom_object, *QUEUES, name)


@pytest.mark.parametrize("count", [COUNT, pytest.param(10_000, marks=[
    pytest.mark.reliability, pytest.mark.timeout(4 * 3600)])])
def test_fuzzed_objects_crash_nothing_get_a_reason_and_good_gangs_still_schedule(
        count: int, control_plane: ControlPlane, tenant: Tenant, sent: Sent,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    tenant.create_nodes(2, gpus=8)
    # Events at the production interval: the tests' 1 s makes every pending pod's event series
    # a write a second, which at 10,000 objects is most of the writer's work, and tests nothing
    # here.
    runner = start_scheduler(event_min_interval_seconds=60.0)
    crashes: list[BaseException] = []
    run_once = runner.live.scheduler.run_once

    def recording(takeover: bool = False) -> Any:
        try:
            return run_once(takeover)
        except BaseException as exc:
            crashes.append(exc)
            raise

    runner.live.scheduler.run_once = recording  # type: ignore[method-assign]
    numbers = itertools.count()
    api = connect(str(control_plane.kubeconfig))

    @settings(max_examples=count, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(OBJECTS)
    def send(obj: dict[str, Any]) -> None:
        sent.send(api, tenant, sanitized(copy.deepcopy(obj), tenant, next(numbers)))

    with capture_logs() as logs:
        send()
        assert sent.accepted, f"the apiserver refused all {len(sent.refused)} objects"
        settle_and_check(runner, tenant, sent, crashes)
        read_surfaces_show_no_absurd_value(runner)
    failures = said_once(logs)
    events = [e for e in tenant.events() if e.get("reason") in ("InvalidAnnotation",
                                                                  "InvalidObject")]
    written = runner.live.metrics.registry.get_sample_value(
        "gang_scheduler_status_writes_failed_total")
    print(f"fuzzed objects: {len(sent.accepted) + len(sent.refused)} tried, "
          f"{len(sent.accepted)} accepted by the apiserver "
          f"({len(sent.pods)} pods, {len(sent.jobs)} Jobs, {len(sent.queues)} Queues), "
          f"{len(sent.refused)} refused; 0 crashes in {runner.live.scheduler.cycles} cycles; "
          f"failures counted: {len(events)} InvalidAnnotation/InvalidObject events, "
          f"{failures} warnings logged (each once), status_writes_failed_total {written:g}; "
          f"refused, for example: {sent.refused[:3]}")


def settle_and_check(runner: InProcessScheduler, tenant: Tenant, sent: Sent,
                     crashes: list[BaseException]) -> None:
    """The scheduler keeps cycling, schedules a good gang, and says why for every pod it
    does not bind; every Queue has its Valid condition."""
    control_plane = tenant.cp
    passes = runner.live.passes  # each a cycle if anything changed: all of it seen
    wait_for(lambda: runner.live.passes >= passes + 5, 60, what="5 loop passes more")
    drain(runner.live.actuator.writer)

    good = tenant.create_gang("good", 2)
    wait_for(lambda: tenant.all_bound(good), 60, what="a good gang bound beside the fuzz")
    assert crashes == [] and runner.errors == []
    assert runner.thread is not None and runner.thread.is_alive()

    def silent() -> list[str]:
        """Accepted pods, not bound, that say nothing about why."""
        pods = tenant.pods()
        told = {str((e.get("regarding") or {}).get("uid")) for e in tenant.events()
                if e.get("type") == "Warning"}
        ours = {*sent.pods, *(n for n, p in pods.items() if (p["metadata"].get("labels") or {})
                              .get(JOB_NAME_LABEL) in sent.jobs)}
        return [n for n in sorted(ours) if (pod := pods.get(n)) is not None
                and not pod["spec"].get("nodeName") and not unschedulable_message(pod)
                and pod["metadata"]["uid"] not in told]

    wait_for(lambda: not silent(), 60, what="a reason on every pod not bound")

    def valid_conditions() -> dict[str, dict[str, Any] | None]:
        """Queue -> its Valid condition (None while it has none: Queue statuses are written
        every few seconds, not with the cycle the writer drained)."""
        out: dict[str, dict[str, Any] | None] = {}
        for name in sent.queues:
            status = rest.call(control_plane.custom.get_cluster_custom_object, *QUEUES,
                               name).get("status") or {}
            out[name] = next((c for c in status.get("conditions") or []
                              if c.get("type") == "Valid"), None)
        return out

    try:
        # (True too when no fuzzed Queue was accepted: then there is nothing to check.)
        wait_for(lambda: all(valid_conditions().values()), 60,
                 what="a Valid condition on every Queue")
    except AssertionError:
        missing = [n for n, c in valid_conditions().items() if c is None]
        raise AssertionError(f"Queues without a Valid condition: {missing}") from None
    for valid in valid_conditions().values():  # once written, a condition stays
        assert valid is not None and (valid["status"] == "True" or valid.get("message")), valid


def read_surfaces_show_no_absurd_value(runner: InProcessScheduler) -> None:
    """``explain`` of every gang the scheduler knows (pending, running, unformed), its views
    and its dashboard and state over HTTP: no traceback, no time beyond what it accepts."""
    live = runner.live
    now = time.time()
    inp = live.cache.cycle_input(now)
    ids = {g.id for g in inp.gangs.pending} | set(inp.snapshot.running) | set(inp.gangs.problems)
    for gid in sorted(ids):
        said, found = explain_text(gid, live.cache, live.policies, now)
        assert found, said
        sanity.explained(said)
    view = live.view()
    assert view is not None
    sanity.view(view)
    server = serve(live.metrics.registry, live.health, "127.0.0.1", 0, view=live.view)
    try:
        port = server.server_address[1]
        for path in ("/", "/api/v1/state", "/metrics"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as reply:
                body = reply.read().decode()
            assert reply.status == 200 and "Traceback" not in body, (path, body[:500])
    finally:
        server.shutdown()


def said_once(logs: list[MutableMapping[str, Any]]) -> int:
    """How many failures were logged at warning level; each (object or write, and what was
    wrong) once: an object warned about again on every update or cycle would be a flood."""
    keys = Counter(
        tuple(sorted((k, str(v)) for k, v in e.items()))
        for e in logs if e.get("log_level") == "warning" and e["event"] in (
            "annotation_invalid", "object_unusable", "status_write_failed",
            "gang_inconsistent"))
    repeated = {k: n for k, n in keys.items() if n > 1}
    assert not repeated, repeated
    return sum(keys.values())

