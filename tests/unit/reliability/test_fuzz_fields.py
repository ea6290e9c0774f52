"""Every annotation, label and Queue field the scheduler reads, with every adversarial value.

Not sampled: each field of the scheduler's own lists (``scheduler.feed.user_fields.FIELDS``,
``policies.parsing.QUEUE_FIELDS``) is tried with each of ``ADVERSARIAL_TEXT`` or
``ADVERSARIAL_JSON`` on a small cluster with a running gang, a gang waiting behind it, a Job
and a JobSet. Each scene runs real cycles (``Scheduler.run_once``: grouping, ``decide``,
accounting, metrics), then every gang's ``explain``, the views' rows, and the text and HTML
views. The properties: nothing raises; no estimate, ETA or time shown is beyond what the
scheduler accepts (``MAX_DURATION_SECONDS``); a value the annotation checks refuse is said
once per object with the field's name. The figures (scenes, objects, crashes, what was said)
are printed (``pytest -s``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from policies.errors import FieldError
from policies.parsing import QUEUE_FIELDS, parse_queue
from policies.queues import PolicySet
from policies.validation import LoadResult, parse_documents
from scheduler.cli.explain import explain_text
from scheduler.feed import user_fields
from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig
from scheduler.kube.read.input_warnings import InputWarnings
from scheduler.model import Node, PodRequirements, Resources
from scheduler.model.workloads import (
    EXPECTED_RUNTIME_ANNOTATION,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    JobInfo,
    JobSetInfo,
    OwnerRef,
    PodGroupInfo,
    PodInfo,
    PodPhase,
    ReplicatedJobInfo,
)
from scheduler.run.loop import Scheduler
from scheduler.run.metrics import SchedulerMetrics
from scheduler.views import live
from tests.unit.policies.builders import POOL
from tests.unit.reliability import sanity
from tests.unit.reliability.strategies import (
    ADVERSARIAL_JSON,
    ADVERSARIAL_TEXT,
    QUEUE,
    field_values,
    set_field,
)
from tests.unit.test_loop_metrics import Clock, FakeActuator, Policies

NOW = 1_790_000_000.0
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"


@dataclass
class Figures:
    scenes: int = 0
    objects: int = 0
    cycles: int = 0
    explained: int = 0
    warned: int = 0  # values the annotation checks said something about (once each)
    refused_fields: int = 0  # Queue field values the parser refused, naming the field
    unformed: int = 0  # gangs that could not be formed, with a reason
    crashes: list[str] = field(default_factory=list)

    def add(self, other: Figures) -> None:
        for name in ("scenes", "objects", "cycles", "explained", "warned", "refused_fields",
                     "unformed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.crashes += other.crashes

    def line(self, what: str) -> str:
        return (f"{what}: {self.scenes} scenes, {self.objects} objects, {self.cycles} cycles, "
                f"{self.explained} explains; {len(self.crashes)} crashes; failures said: "
                f"{self.warned} annotation warnings, {self.unformed} unformed gangs, "
                f"{self.refused_fields} refused Queue fields")


def _pods(name: str, count: int, gpus: int, *, node: str = "", labels: dict[str, str],
          annotations: dict[str, str], owner: OwnerRef | None = None) -> list[PodInfo]:
    return [PodInfo(uid=f"uid-{name}-{i}", namespace="ns", name=f"{name}-{i}",
                    requirements=PodRequirements(Resources.of(gpu=gpus, cpu=1000)),
                    scheduler_name="gang-scheduler", node_name=node,
                    phase=PodPhase.RUNNING if node else PodPhase.PENDING,
                    started_at=NOW - 60 if node else None, creation_time=NOW - 120,
                    labels=dict(labels), annotations=dict(annotations), owner=owner)
            for i in range(count)]


def scene(kind: str = "", where: str = "", key: str = "", value: str = "") -> list[Any]:
    """Two 8-GPU nodes; PodGroup ``run`` (2 x 4 GPUs) running on n0 for an hour; PodGroup
    ``wait`` (2 x 8 GPUs) behind it; a Job ``j`` of 2 x 1 GPU; a JobSet ``s`` of 1 x 1 GPU.
    *key* = *value* as an *where* ("annotation" or "label") on every object of *kind*."""
    def extra(of: str, base: dict[str, str], wanted: str) -> dict[str, str]:
        return {**base, key: value} if (of, wanted) == (kind, where) else base

    q = {QUEUE_LABEL: "team"}
    objects: list[Any] = [
        Node.build(f"n{i}", Resources.of(gpu=8, cpu=64_000, pods=110),
                   extra("Node", {POOL: "p"}, "label")) for i in range(2)]
    for name, gpus, node in (("run", 4, "n0"), ("wait", 8, "")):
        objects.append(PodGroupInfo(
            "ns", name, uid=f"pg-{name}", min_member=2, creation_time=NOW - 120,
            labels=extra("PodGroup", q, "label"),
            annotations=extra("PodGroup", {EXPECTED_RUNTIME_ANNOTATION: "1h"} if node else {},
                              "annotation")))
        objects += _pods(name, 2, gpus, node=node,
                         labels=extra("Pod", {**q, POD_GROUP_LABEL: name}, "label"),
                         annotations=extra("Pod", {}, "annotation"))
    job = OwnerRef("Job", "j", "uid-job-j")
    objects.append(JobInfo("ns", "j", "uid-job-j", parallelism=2, creation_time=NOW - 120,
                           labels=extra("Job", q, "label"),
                           annotations=extra("Job", {}, "annotation")))
    objects += _pods("j", 2, 1, labels=extra("Pod", q, "label"),
                     annotations=extra("Pod", {}, "annotation"), owner=job)
    objects.append(JobSetInfo("ns", "s", "uid-js-s", (ReplicatedJobInfo("w"),),
                              creation_time=NOW - 120, labels=extra("JobSet", q, "label"),
                              annotations=extra("JobSet", {}, "annotation")))
    objects += _pods("s", 1, 1, labels=extra("Pod", {**q, JOBSET_NAME: "s",
                                                     REPLICATED_JOB: "w"}, "label"),
                     annotations=extra("Pod", {}, "annotation"),
                     owner=OwnerRef("Job", "s-w-0", "uid-job-s-w-0"))
    return objects


def _feed(cache: ClusterCache, objects: Iterable[Any]) -> None:
    for obj in objects:
        if isinstance(obj, Node):
            cache.upsert_node(obj)
        elif isinstance(obj, PodInfo):
            cache.upsert_pod(obj)
        elif isinstance(obj, PodGroupInfo):
            cache.upsert_group(obj)
        elif isinstance(obj, JobInfo):
            cache.upsert_job(obj)
        else:
            cache.upsert_jobset(obj)


def run_scene(objects: list[Any], policies: PolicySet, figures: Figures) -> None:
    """Two cycles of *objects* (the first binds what fits), then every gang explained and
    the views built and shown."""
    figures.scenes += 1
    figures.objects += len(objects)
    clock = Clock(NOW)
    cache = ClusterCache(GroupingConfig(default_queue="team"))
    _feed(cache, objects)
    sched = Scheduler(cache, Policies(policies), clock, FakeActuator(), SchedulerMetrics(),
                      backoff_initial=5.0)
    for _ in range(2):
        plan = sched.run_once()
        figures.cycles += 1
        for reason in plan.pending.values():
            sanity.estimate(reason.estimated_start, clock.now, f"estimated start of {reason}")
        clock.now += 1.0
    last = sched.last_cycle
    assert last is not None
    inp, in_force = last
    figures.unformed += len(inp.gangs.problems)
    sanity.view(live.build(live.Cycle(inp, plan, in_force, sched.last_queues), cache.gang_pods))
    ids = {g.id for g in inp.gangs.pending} | set(inp.snapshot.running) | set(inp.gangs.problems)
    for gid in sorted(ids):
        said, found = explain_text(gid, cache, Policies(policies), clock.now)
        figures.explained += 1
        assert found, said
        sanity.explained(said)


def _guarded(figures: Figures, what: str, body: Any) -> None:
    """Run *body*; an exception is a crash, recorded with what was tried."""
    try:
        body()
    except AssertionError:
        raise
    except Exception as exc:  # the property: nothing raises
        figures.crashes.append(f"{what}: {type(exc).__name__}: {exc}")


ORG = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue", "metadata": {"name": "org"},
       "spec": {"quotas": [{"pool": "p", "nominal": {"nvidia.com/gpu": 16}}]}}


def _team_queue() -> dict[str, Any]:
    """The strategies' full Queue (every field set, so that each path replaces a value that
    reads well) as "team" under "org", in pool p, admitting every namespace."""
    raw: dict[str, Any] = copy.deepcopy(QUEUE)
    raw["metadata"]["name"] = "team"
    raw["spec"].update(parent="org", namespaces=["*"])
    raw["spec"]["quotas"][0]["pool"] = "p"
    return raw


def _policies(team: dict[str, Any]) -> LoadResult:
    """org and *team* as the live scheduler takes them: what is valid, and the errors."""
    return parse_documents([("org.yaml", ORG), ("team.yaml", team)])


TEAM = _policies(_team_queue())


@pytest.fixture(scope="module")
def total() -> Iterator[Figures]:
    """The figures of the whole module, printed at its end (``pytest -s``)."""
    figures = Figures()
    yield figures
    print(figures.line("every field, every value"))


@pytest.mark.parametrize("fld", user_fields.FIELDS,
                         ids=[f"{f.where} {f.key}" for f in user_fields.FIELDS])
def test_every_value_of_every_annotation_and_label_crashes_nothing(
        fld: user_fields.UserField, total: Figures) -> None:
    figures = Figures()
    sink = InputWarnings(clock=lambda: NOW)
    for value in field_values(fld):
        for kind in fld.on:
            objects = scene(kind, fld.where, fld.key, value)
            _guarded(figures, f"{kind} {fld.where} {fld.key}={value[:40]!r}",
                     lambda objects=objects: run_scene(objects, TEAM.policies, figures))
        if fld.where == "annotation":
            before = len(sink.drain())
            for _ in range(2):  # an update that changes nothing is not said again
                sink.check("Pod", "v1", {"metadata": {"uid": f"u-{value[:40]}", "name": "p",
                                                      "annotations": {fld.key: value}}})
            said = sink.drain()
            assert before == 0 and len(said) <= 1
            figures.warned += len(said)
            assert all(fld.key in f.message for f in said)
    total.add(figures)
    assert figures.crashes == [], figures.crashes[:5]


def test_every_value_of_every_queue_field_is_refused_naming_it_or_crashes_nothing(
        total: Figures) -> None:
    figures = Figures()
    for path in QUEUE_FIELDS:
        for value in ADVERSARIAL_JSON:
            loaded = _policies(set_field(_team_queue(), path, value))
            if loaded.errors:  # the last good state stays: here, org alone
                figures.refused_fields += 1
                assert all(isinstance(e, FieldError) and e.path and e.reason
                           for e in loaded.errors), loaded.errors
            _guarded(figures, f"Queue {path}={str(value)[:40]!r}",
                     lambda pol=loaded.policies: run_scene(scene(), pol, figures))
    total.add(figures)
    assert figures.crashes == [], figures.crashes[:5]


def test_the_field_lists_are_the_ones_the_code_reads() -> None:
    """A key a module defines is read somewhere: it must be in ``user_fields`` (fuzzed) or
    written only. And every Queue field path is one the full example Queue has."""
    from scheduler.feed import grouping_jobset, grouping_terms
    from scheduler.model import hami, nodes, shortfall, workloads

    defined = {value for module in (workloads, grouping_terms, grouping_jobset, shortfall, nodes,
                                    hami)
               for name, value in vars(module).items()
               if isinstance(value, str) and name.endswith(("_LABEL", "_ANNOTATION"))}
    listed = {f.key for f in user_fields.FIELDS}
    assert defined - listed - user_fields.WRITTEN == set()
    assert {k for k in nodes.DEFAULT_TOPOLOGY_LABELS} <= listed
    assert TEAM.errors == () and len(TEAM.policies.queues) == 2
    for path in QUEUE_FIELDS:  # each path names a field of the example, which reads well
        assert parse_queue(set_field(_team_queue(), path, _value_at(_team_queue(), path))
                           )[1] == [], path
    assert len(ADVERSARIAL_TEXT) >= 40


def _value_at(obj: dict[str, Any], path: str) -> Any:
    target: Any = obj
    for token in path.split("."):
        target = (target[token[:-2]][0] if token.endswith("[]")
                  else target[token[:-2]]["nvidia.com/gpu"] if token.endswith("{}")
                  else target[token])
    return target
