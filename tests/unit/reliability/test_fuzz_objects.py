"""Objects no test wrote, fed to everything that reads cluster objects and policies.

The properties: a converter returns a value or raises ``ConversionError`` naming a field (never
another exception, never a silent garbage value); the policy parser returns a value or
``FieldError``s, never raises; a cache fed any mix of converted pods, PodGroups, Jobs and nodes
builds a cycle input and ``decide`` plans on it without crashing; what converts well is still
scheduled (a well-formed gang beside broken objects binds).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.errors import FieldError
from policies.parsing import parse_queue, parse_scheduler_policy
from policies.queues import PolicySet, QueueSet
from scheduler.decide import cycle
from scheduler.feed.cache import ClusterCache
from scheduler.kube.read import convert
from scheduler.kube.read.convert import ConversionError
from scheduler.model.demand import gpus_of
from scheduler.model.workloads import PodInfo
from tests.unit.reliability import strategies as fuzz

FUZZ = settings(max_examples=fuzz.FUZZ_EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _converts_or_names_a_field(convert_fn: Any, obj: dict[str, Any]) -> Any:
    try:
        return convert_fn(obj)
    except ConversionError as exc:
        assert exc.kind and str(exc), exc  # says which object (and field, when it is one)
        return None


@FUZZ
@given(fuzz.pods())
def test_pods(obj: dict[str, Any]) -> None:
    pod = _converts_or_names_a_field(convert.pod_from_json, obj)
    if pod is not None:
        assert pod.name and pod.namespace
        assert all(v >= 0 for v in pod.requests.values()), pod.requests


@FUZZ
@given(fuzz.podgroups())
def test_podgroups(obj: dict[str, Any]) -> None:
    group = _converts_or_names_a_field(convert.podgroup_from_json, obj)
    if group is not None:
        assert group.min_member >= 0


@FUZZ
@given(fuzz.nodes())
def test_nodes(obj: dict[str, Any]) -> None:
    node = _converts_or_names_a_field(convert.node_from_json, obj)
    if node is not None:
        assert all(v >= 0 for v in node.allocatable.values()), node.allocatable


@FUZZ
@given(fuzz.jobs())
def test_jobs(obj: dict[str, Any]) -> None:
    job = _converts_or_names_a_field(convert.job_from_json, obj)
    if job is not None:
        assert job.parallelism >= 0


@FUZZ
@given(fuzz.queues())
def test_queues(obj: dict[str, Any]) -> None:
    queue, errors = parse_queue(obj)
    assert (queue is None) == bool(errors), (queue, errors)
    assert all(isinstance(e, FieldError) and e.reason for e in errors)
    if queue is not None:
        assert queue.weight > 0 and math.isfinite(queue.weight)


@FUZZ
@given(fuzz.scheduler_policies())
def test_scheduler_policies(obj: dict[str, Any]) -> None:
    policy, errors = parse_scheduler_policy(obj)
    assert (policy is None) == bool(errors), (policy, errors)
    if policy is not None:
        assert policy.max_reservations >= 1


def _good_pod(name: str, group: str) -> dict[str, Any]:
    pod = fuzz.fixture("pod")
    pod["metadata"].update(name=name, uid=f"uid-{name}", namespace="fuzz",
                           labels={"scheduling.x-k8s.io/pod-group": group,
                                   "gangscheduler.io/queue": "q"})
    pod["metadata"].pop("annotations", None)
    pod["spec"].pop("nodeName", None)
    pod["spec"]["schedulerName"] = "gang-scheduler"
    pod["spec"].pop("nodeSelector", None)
    pod["spec"].pop("affinity", None)
    pod["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    pod["status"] = {"phase": "Pending"}
    for c in pod["spec"]["containers"]:
        c["resources"] = {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                          "limits": {"nvidia.com/gpu": "1"}}
    return pod


def _good_group(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "fuzz", "uid": f"pg-{name}",
                         "labels": {"gangscheduler.io/queue": "q"}},
            "spec": {"minMember": min_member}}


@settings(max_examples=max(20, fuzz.FUZZ_EXAMPLES // 10), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(fuzz.pods(), max_size=8), st.lists(fuzz.podgroups(), max_size=3),
       st.lists(fuzz.jobs(), max_size=2), st.lists(fuzz.nodes(), max_size=3))
def test_a_cache_of_broken_objects_still_plans_and_schedules_the_good_gang(
        pods: list[dict[str, Any]], groups: list[dict[str, Any]], jobs: list[dict[str, Any]],
        nodes: list[dict[str, Any]]) -> None:
    """Whatever else the watch delivered, a well-formed gang of two on a well-formed node binds."""
    cache = ClusterCache()
    good_node = fuzz.fixture("node")
    good_node["metadata"].update(name="good-node", uid="good-node")
    kept: list[Any] = []
    feeds: list[tuple[dict[str, Any], Callable[[Any], Any], Callable[[Any], None]]] = [
        *((o, convert.node_from_json, cache.upsert_node) for o in [good_node, *nodes]),
        *((o, convert.podgroup_from_json, cache.upsert_group) for o in groups),
        *((o, convert.job_from_json, cache.upsert_job) for o in jobs),
        *((o, convert.pod_from_json, cache.upsert_pod) for o in pods),
        *((o, convert.pod_from_json, cache.upsert_pod) for o in
          (_good_pod("good-0", "good"), _good_pod("good-1", "good"))),
        (_good_group("good", 2), convert.podgroup_from_json, cache.upsert_group),
    ]
    for raw, fn, feed in feeds:
        value = _converts_or_names_a_field(fn, raw)
        if value is not None:
            feed(value)
            kept.append(value)
    good = next(n for n in cache.nodes() if n.name == "good-node")
    pool = good.pool
    queue, errors = parse_queue({
        "apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"},
        "spec": {"namespaces": ["fuzz"], "quotas": [
            {"pool": pool, "nominal": {"nvidia.com/gpu": 10**6, "cpu": 10**6}}]}})
    assert queue is not None, errors
    queues = QueueSet.of([queue])
    inp = cache.cycle_input(0.0)
    plan = cycle.decide(inp.snapshot, inp.gangs.pending, PolicySet(queues), 1.0)
    if gpus_of(good.allocatable) >= 2 and not [p for p in kept if isinstance(p, PodInfo)
                                            and p.name not in ("good-0", "good-1")
                                            and p.namespace == "fuzz"]:
        # Nothing else claims the good node's GPUs in our namespace: the good gang binds there.
        bind = plan.bind_of("fuzz/good")
        assert bind is not None, plan.pending.get("fuzz/good")


# What the fuzzing found, kept as plain cases: each crashed (or passed a garbage value through)
# before it was fixed.
FOUND = [
    ("toleration key a list", ("spec", "tolerations"), [{"key": ["x"], "operator": "Exists"}],
     "spec.tolerations[0].key: expected a string, got ['x']"),
    ("toleration operator unknown", ("spec", "tolerations"), [{"key": "x", "operator": "Foo"}],
     "spec.tolerations[0].operator: must be Equal or Exists, got 'Foo'"),
    ("toleration not an object", ("spec", "tolerations"), ["x"],
     "spec.tolerations[0]: expected an object, got 'x'"),
    ("nodeSelector value a list", ("spec", "nodeSelector"), {"a": ["x"]},
     "spec.nodeSelector.a: expected a string value, got ['x']"),
    ("nodeSelector value a number", ("spec", "nodeSelector"), {"a": 5},
     "spec.nodeSelector.a: expected a string value, got 5"),
]


@pytest.mark.parametrize(("path", "value", "says"), [c[1:] for c in FOUND],
                         ids=[c[0] for c in FOUND])
def test_found_by_fuzzing(path: tuple[str, ...], value: Any, says: str) -> None:
    pod = fuzz.fixture("pod")
    target = pod
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    with pytest.raises(ConversionError) as err:
        convert.pod_from_json(pod)
    assert says in str(err.value)


def test_found_by_fuzzing_in_policies_and_jobs() -> None:
    policy = dict(fuzz.POLICY, spec={"preset": []})
    assert [e.path for e in parse_scheduler_policy(policy)[1]] == ["spec.preset"]
    job = fuzz.fixture("job")
    job["spec"]["parallelism"] = -1
    with pytest.raises(ConversionError, match=r"spec\.parallelism: must be >= 0, got -1"):
        convert.job_from_json(job)
