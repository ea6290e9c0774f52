"""Preemptions carried out: whole gangs, the Eviction API with the grace period, budgets obeyed.

The victims' pods come from the plan's evictions (what ``decide`` saw bound and not yet
terminating); a refused eviction is retried for the pods not evicted yet.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, Eviction, Nomination
from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig
from scheduler.kube.client import Response
from scheduler.kube.events import EventRecorder
from scheduler.kube.write.binder import Binder
from scheduler.kube.write.evictor import (
    EVICTION_BLOCKED,
    Budget,
    Evictor,
    VictimPod,
    budget_refusal,
    victim_grace,
)
from scheduler.model import PodRef, PodRequirements, Resources
from scheduler.model.labels import EVERYTHING, NOTHING, LabelSelector
from scheduler.model.workloads import (
    JOBSET_NAME_LABEL,
    JOBSET_UID_LABEL,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    PodGroupInfo,
    PodInfo,
    PodPhase,
)
from tests.unit.policies.builders import policies, queue, victim
from tests.unit.test_loop_metrics import node

PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


@dataclass
class Api:
    """Evictions (dry-run or real), pod status patches and events, as the apiserver answers."""

    protected: set[str] = field(default_factory=set)  # pod names a budget protects
    evicted: dict[str, Any] = field(default_factory=dict)  # pod name -> deleteOptions
    dry_runs: list[str] = field(default_factory=list)
    conditions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    budgets: list[dict[str, Any]] = field(default_factory=list)  # PodDisruptionBudget JSON
    graces: dict[str, int] = field(default_factory=dict)  # pod name -> its own grace period
    job: str = ""  # the Job controlling every victim pod ("" none)
    jobset: str = ""  # the JobSet that made that Job ("" none)
    owner: dict[str, Any] = field(default_factory=dict)  # a controlling owner instead of job

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        if method == "GET" and path.endswith("/poddisruptionbudgets"):
            return Response(200, json.dumps({"items": self.budgets}).encode())
        if method == "GET" and "/pods/" in path:  # a victim pod, as the evictor reads it
            name = path.split("/")[6]
            spec = ({"terminationGracePeriodSeconds": self.graces[name]}
                    if name in self.graces else {})
            owners = ([{"kind": "Job", "name": self.job, "uid": f"uid-{self.job}",
                        "controller": True}] if self.job else [])
            if self.owner:
                owners = [{**self.owner, "controller": True}]
            labels = {POD_GROUP_LABEL: name.rsplit("-", 1)[0]}
            if self.jobset:
                labels |= {JOBSET_NAME_LABEL: self.jobset,
                           JOBSET_UID_LABEL: f"uid-{self.jobset}"}
            return Response(200, json.dumps({
                "metadata": {"name": name, "uid": f"uid-{name}", "ownerReferences": owners,
                             "labels": labels},
                "spec": spec}).encode())
        if path.endswith("/eviction"):
            name = path.split("/")[6]
            dry = (query or {}).get("dryRun") == "All"
            if dry:
                self.dry_runs.append(name)
            if name in self.protected:
                return Response(429, json.dumps({"message": PDB_REFUSAL}).encode())
            if not dry:
                self.evicted[name] = body["deleteOptions"]
            return Response(201, b"{}")
        if path.endswith("/status"):
            self.conditions.setdefault(path.split("/")[6], []).extend(
                body["status"].get("conditions", []))
            return Response(200, b"{}")
        if "/events" in path:
            self.events.append(body)
            return Response(201, b"{}")
        raise AssertionError(f"unexpected {method} {path}")


class Inline:
    def submit(self, key: str, task: Callable[[], None]) -> None:
        task()


def bound_gang(cache: ClusterCache, name: str, size: int, node: str = "n1",
               graces: tuple[int | None, ...] = ()) -> None:
    for i in range(size):
        cache.upsert_pod(PodInfo(
            grace_period_seconds=graces[i] if i < len(graces) else None,
            uid=f"uid-{name}-{i}", namespace="ns", name=f"{name}-{i}",
            requirements=PodRequirements(Resources.of(gpu=4)), scheduler_name="gang-scheduler",
            node_name=node, phase=PodPhase.RUNNING,
            labels={POD_GROUP_LABEL: name, QUEUE_LABEL: "team"},
            annotations={"gangscheduler.io/min-member": str(size)}))


#: The pods of the victim gang "low" (two members).
LOW = tuple(PodRef("ns", f"low-{i}", f"uid-low-{i}") for i in range(2))


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup() -> Any:
    api, clock = Api(), Clock()
    binder = Binder(api, concurrency=4)  # type: ignore[arg-type]
    evictor = Evictor(binder, EventRecorder(api), Inline(),
                      grace_period_seconds=17, retry_seconds=5, monotonic=clock)
    yield api, clock, evictor
    binder.close()


def plan(evict: bool, pods: tuple[PodRef, ...] = LOW) -> CyclePlan:
    nom = Nomination("ns/high", ("n1",), ("ns/low",), since=0.0)
    ev = (Eviction(victim("ns/low", pods), "ns/high", "priority 100 > 0"),) if evict else ()
    return CyclePlan(now=0.0, evictions=ev, nominations=(nom,))


def test_every_pod_of_the_victim_is_marked_and_evicted_with_the_grace_period(setup: Any) -> None:
    api, _, evictor = setup
    report = evictor.evict(plan(True), 0.0)
    assert report.evicted == ("ns/low",) and report.blocked == {}
    assert sorted(api.evicted) == ["low-0", "low-1"]
    assert all(o["gracePeriodSeconds"] == 17 for o in api.evicted.values())
    for pod in ("low-0", "low-1"):  # before the eviction, and again after the API's own
        assert len(api.conditions[pod]) == 2
        for cond in api.conditions[pod]:
            assert (cond["type"], cond["status"]) == ("DisruptionTarget", "True")
            assert cond["reason"] == "PreemptionByScheduler" and "ns/high" in cond["message"]
    preempted = [e for e in api.events if e["reason"] == "Preempted"]
    assert sorted(e["regarding"]["name"] for e in preempted) == ["low-0", "low-1"]
    assert all("ns/high" in e["note"] for e in preempted)


def test_the_victims_job_is_told_once_with_how_many_pods_went(setup: Any) -> None:
    """The pods go, the Job stays: ``explain`` of the Job reads this event while the Job
    controller recreates them (issue 33)."""
    api, _, evictor = setup
    api.job = "train"
    evictor.evict(plan(True), 0.0)
    on_job = [e for e in api.events if e["regarding"]["kind"] == "Job"]
    assert [(e["reason"], e["regarding"]["name"], e["regarding"]["uid"]) for e in on_job] == [
        ("Preempted", "train", "uid-train")]
    assert "ns/high" in on_job[0]["note"] and "2 pod(s) evicted" in on_job[0]["note"]


def test_the_jobset_that_made_the_victims_job_is_told_too(setup: Any) -> None:
    """A JobSet's failure policy may replace its Jobs (and the events on them): the JobSet
    itself says why its pods went, once, with how many."""
    api, _, evictor = setup
    api.job, api.jobset = "train-workers-0", "train"
    evictor.evict(plan(True), 0.0)
    on_jobset = [e for e in api.events if e["regarding"]["kind"] == "JobSet"]
    assert [(e["reason"], e["regarding"]["name"], e["regarding"]["uid"],
             e["regarding"]["apiVersion"]) for e in on_jobset] == [
        ("Preempted", "train", "uid-train", "jobset.x-k8s.io/v1alpha2")]
    assert "ns/high" in on_jobset[0]["note"], on_jobset
    assert "2 pod(s) of its Jobs evicted" in on_jobset[0]["note"], on_jobset


def test_the_operators_object_owning_the_victims_pods_is_told_too(setup: Any) -> None:
    """KubeRay recreates a RayCluster's evicted pods: ``kubectl describe raycluster`` says
    why they went, once, with how many."""
    api, _, evictor = setup
    api.owner = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "u-rc"}
    evictor.evict(plan(True), 0.0)
    on_owner = [e for e in api.events if e["regarding"]["kind"] == "RayCluster"]
    assert [(e["reason"], e["regarding"]["name"], e["regarding"]["uid"],
             e["regarding"]["apiVersion"]) for e in on_owner] == [
        ("Preempted", "rc", "u-rc", "ray.io/v1")]
    assert "ns/high" in on_owner[0]["note"] and "2 pod(s) evicted" in on_owner[0]["note"]


def test_an_owner_of_another_kind_is_not_told(setup: Any) -> None:
    api, _, evictor = setup
    api.owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-rs"}
    evictor.evict(plan(True), 0.0)
    assert {e["regarding"]["kind"] for e in api.events} == {"Pod"}


def test_no_jobset_is_told_when_the_victim_has_none(setup: Any) -> None:
    api, _, evictor = setup
    api.job = "train"
    evictor.evict(plan(True), 0.0)
    assert not [e for e in api.events if e["regarding"]["kind"] == "JobSet"]


def test_a_budget_refusing_one_pod_leaves_the_whole_gang_running(setup: Any) -> None:
    api, _, evictor = setup
    api.protected = {"low-1"}
    report = evictor.evict(plan(True), 0.0)
    assert report.evicted == ()
    assert "disruption budget" in report.blocked["ns/low"]
    assert api.evicted == {}  # low-0 was allowed, but half a gang is never evicted
    assert api.conditions == {}  # not marked either: it is not being disrupted
    blocked = [e for e in api.events if e["reason"] == EVICTION_BLOCKED]
    assert [e["regarding"]["name"] for e in blocked] == ["low-1"]


def test_a_refused_eviction_is_retried_while_the_preemptor_stays_nominated(setup: Any) -> None:
    api, clock, evictor = setup
    api.protected = {"low-0", "low-1"}
    assert evictor.retry_in() is None
    assert evictor.evict(plan(True), 0.0).blocked
    clock.now = 2.0
    assert evictor.retry_in() == 3.0  # a cycle is due then, even if nothing changes
    assert evictor.evict(plan(False), 2.0).blocked == {}  # too soon to retry
    assert api.dry_runs.count("low-0") == 1
    api.protected = set()  # the budget now allows it
    clock.now = 6.0
    report = evictor.evict(plan(False), 6.0)
    assert report.evicted == ("ns/low",)
    assert sorted(api.evicted) == ["low-0", "low-1"]


def test_no_retry_once_the_preemptor_is_no_longer_nominated(setup: Any) -> None:
    api, clock, evictor = setup
    api.protected = {"low-0"}
    evictor.evict(plan(True), 0.0)
    api.protected = set()
    clock.now = 10.0
    assert evictor.evict(CyclePlan(now=10.0), 10.0).evicted == ()
    assert api.evicted == {}


def test_only_the_pods_the_plan_names_are_evicted(setup: Any) -> None:
    """``decide`` leaves out pods already terminating: the evictor evicts exactly these."""
    api, _, evictor = setup
    report = evictor.evict(plan(True, LOW[1:]), 0.0)
    assert report.evicted == ("ns/low",) and sorted(api.evicted) == ["low-1"]


@dataclass
class DryRunsPass(Api):
    """The budget answers dry runs yes but refuses the real eviction of ``refuse``'s pods
    (another disruption took its allowance meanwhile); real evictions are counted."""

    refuse: set[str] = field(default_factory=set)
    real: list[str] = field(default_factory=list)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        if path.endswith("/eviction") and (query or {}).get("dryRun") != "All":
            name = path.split("/")[6]
            if name in self.refuse:
                return Response(429, json.dumps({"message": PDB_REFUSAL}).encode())
            self.real.append(name)
        return super().request(method, path, query=query, body=body,
                               content_type=content_type, timeout=timeout)


def test_a_retry_evicts_only_the_pods_not_evicted_yet() -> None:
    api, clock = DryRunsPass(), Clock()
    api.refuse = {"low-1"}
    binder = Binder(api, concurrency=4)  # type: ignore[arg-type]
    evictor = Evictor(binder, EventRecorder(api), Inline(), grace_period_seconds=17,
                      retry_seconds=5, monotonic=clock)
    try:
        assert evictor.evict(plan(True), 0.0).blocked
        assert api.real == ["low-0"]
        api.refuse = set()
        clock.now = 6.0
        assert evictor.evict(plan(False), 6.0).evicted == ("ns/low",)
        assert api.real == ["low-0", "low-1"]  # low-0 was not evicted a second time
    finally:
        binder.close()


@pytest.mark.parametrize(("own", "cap", "given"), [
    (None, 17, 17),   # no grace stated: the apiserver's 30, capped
    (None, 300, 30),  # ... under a larger cap: the 30 the pod would get from a delete
    (0, 17, 0),       # a pod that wants none is not kept waiting
    (5, 17, 5),       # its own, shorter than the cap
    (17, 17, 17),
    (3600, 17, 17),   # an hour asked: the preemptor waits the cap, no more
    (120, 0, 0),      # a cap of 0: every victim goes at once
])
def test_a_victim_keeps_its_own_grace_period_up_to_the_cap(own: int | None, cap: int,
                                                           given: int) -> None:
    assert victim_grace(own, cap) == given


def test_each_victim_pod_is_evicted_with_its_own_grace_period() -> None:
    api = Api(graces={"low-0": 0, "low-1": 10, "low-2": 600})
    binder = Binder(api, concurrency=4)  # type: ignore[arg-type]
    try:
        evictor = Evictor(binder, EventRecorder(api), Inline(), grace_period_seconds=60)
        evictor.evict(plan(True, tuple(PodRef("ns", f"low-{i}", f"uid-low-{i}")
                                       for i in range(3))), 0.0)
    finally:
        binder.close()
    assert {n: o["gracePeriodSeconds"] for n, o in api.evicted.items()} == {
        "low-0": 0, "low-1": 10, "low-2": 60}


def gang_pods(n: int, gang: str = "low") -> list[VictimPod]:
    return [VictimPod(PodRef("ns", f"{gang}-{i}", f"u{i}"), {"gang": gang, "rank": str(i)},
                      None) for i in range(n)]


@pytest.mark.parametrize(("pods", "budgets", "refused_by"), [
    (4, [], None),
    (4, [Budget("all", LabelSelector.equals({"gang": "low"}), 4)], None),
    # Fewer disruptions than the gang's pods it covers: the apiserver would let 3 go.
    (4, [Budget("three", LabelSelector.equals({"gang": "low"}), 3)], "three"),
    (4, [Budget("none", LabelSelector.equals({"gang": "low"}), 0)], "none"),
    # It covers only rank 0 of the gang: one disruption is enough.
    (4, [Budget("rank0", LabelSelector.equals({"rank": "0"}), 1)], None),
    (4, [Budget("rank0", LabelSelector.equals({"rank": "0"}), 0)], "rank0"),
    (4, [Budget("other", LabelSelector.equals({"gang": "high"}), 0)], None),
    (2, [Budget("empty-selector", EVERYTHING, 1)], "empty-selector"),
    (2, [Budget("nil-selector", NOTHING, 0)], None),
    # Disruption controller's negative allowance (more unhealthy than budgeted): refused.
    (1, [Budget("overdrawn", EVERYTHING, -1)], "overdrawn"),
    (4, [Budget("b-ok", EVERYTHING, 4), Budget("a-short", EVERYTHING, 2)], "a-short"),
])
def test_budget_arithmetic_evicts_a_gang_whole_or_not_at_all(
        pods: int, budgets: list[Budget], refused_by: str | None) -> None:
    why = budget_refusal(gang_pods(pods), budgets)
    assert (why is None) == (refused_by is None), why
    if refused_by is not None:
        assert f"PodDisruptionBudget {refused_by}:" in (why or ""), why


def test_a_budget_allowing_one_of_two_refuses_the_whole_gang(setup: Any) -> None:
    """The apiserver would evict the first pod and refuse the second: never asked at all."""
    api, _, evictor = setup
    api.budgets = [{"metadata": {"name": "one"},
                    "spec": {"selector": {"matchLabels": {POD_GROUP_LABEL: "low"}}},
                    "status": {"disruptionsAllowed": 1}}]
    report = evictor.evict(plan(True), 0.0)
    assert report.evicted == () and "PodDisruptionBudget one" in report.blocked["ns/low"]
    assert api.evicted == {} and api.dry_runs == [] and api.conditions == {}
    blocked = [e for e in api.events if e["reason"] == EVICTION_BLOCKED]
    assert sorted(e["regarding"]["name"] for e in blocked) == ["low-0", "low-1"]
    api.budgets[0]["status"]["disruptionsAllowed"] = 2
    assert evictor.evict(plan(True), 0.0).evicted == ("ns/low",)
    assert sorted(api.evicted) == ["low-0", "low-1"]


@pytest.mark.parametrize("refused", [False, True], ids=["evicted", "refused"])
def test_the_victims_podgroup_is_told_who_preempted_it(setup: Any, refused: bool) -> None:
    """Issue 32: only the pods got ``Preempted`` (and they go away). The victim's PodGroup
    gets one too, naming the preemptor, once the eviction goes through (not when refused)."""
    api, _, evictor = setup
    api.protected = {"low-1"} if refused else set()
    ev = Eviction(victim("ns/low", LOW, group_uid="pg-low"), "ns/high", "priority 100 > 0")
    evictor.evict(CyclePlan(now=0.0, evictions=(ev,), nominations=plan(False).nominations), 0.0)
    on_group = [e for e in api.events if e["regarding"]["kind"] == "PodGroup"]
    if refused:
        assert on_group == []
        return
    (event,) = on_group
    assert event["reason"] == "Preempted" and event["type"] == "Warning"
    assert (event["regarding"]["name"], event["regarding"]["uid"]) == ("low", "pg-low")
    assert event["regarding"]["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert event["note"].startswith("preempted by gang ns/high: "), event["note"]


def test_a_running_gangs_podgroup_reaches_the_plans_eviction() -> None:
    """Where the evictor's PodGroup comes from: grouping keeps the running gang's PodGroup
    uid, and the preemption's eviction carries it."""
    cache = ClusterCache(GroupingConfig(default_queue="team"))
    cache.upsert_node(node("n1"))
    bound_gang(cache, "low", 2)
    cache.upsert_group(PodGroupInfo("ns", "low", uid="pg-low", min_member=2))
    cache.upsert_pod(PodInfo(
        uid="uid-high-0", namespace="ns", name="high-0", priority=100,
        requirements=PodRequirements(Resources.of(gpu=8)), scheduler_name="gang-scheduler",
        labels={POD_GROUP_LABEL: "high", QUEUE_LABEL: "team"},
        annotations={"gangscheduler.io/min-member": "1"}))
    inp = cache.cycle_input(0.0)
    assert inp.snapshot.running["ns/low"].group_uid == "pg-low"
    made = decide(inp.snapshot, inp.gangs.pending, policies(queue("team", quota={"p": 8})), 0.0)
    assert [(e.victim, e.group_uid) for e in made.evictions] == [("ns/low", "pg-low")]
