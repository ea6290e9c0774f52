"""Hypothesis strategies for objects no test wrote: apiserver JSON, policies, annotations.

Each strategy starts from a well-formed object (the shapes the apiserver really sends, as in
``tests/unit/kube/fixtures``) and damages it in the ways real clusters do: a field of the wrong
type, a number where a quantity belongs, a huge or negative value, a missing key, unicode, an
annotation in a form the scheduler does not read. The converters and the grouping must turn
every such object into a value or a ``ConversionError`` naming the field, never crash.

``FUZZ_EXAMPLES`` (environment variable ``GANG_SCHEDULER_FUZZ_EXAMPLES``, default 200) is how
many objects each property tries; the reliability run sets 10,000.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

FIXTURES = Path(__file__).parents[1] / "kube" / "fixtures"
FUZZ_EXAMPLES = int(os.environ.get("GANG_SCHEDULER_FUZZ_EXAMPLES", "200"))

#: Every annotation and label the scheduler reads, with values users really write beside junk.
ANNOTATIONS = {
    "gangscheduler.io/expected-runtime": ["2h", "90m", "3600", "1d", "PT2H", "soon", "-5", "",
                                          "1e999", "2h30", "P1D", "🕐"],
    "gangscheduler.io/last-checkpoint": ["2026-11-30T09:00:00Z", "yesterday", "", "2026-13-45",
                                         "2026-11-30T09:00:00", "0", "1e300"],
    "gangscheduler.io/min-member": ["4", "0", "-1", "four", "", "1e3", "99999999999999999999"],
    "gangscheduler.io/topology-required": ["topology.gangscheduler.io/rack", "", "rack!",
                                           "kubernetes.io/hostname", "x" * 300],
    "gangscheduler.io/topology-preferred": ["topology.gangscheduler.io/block", "", "🙂"],
    "gangscheduler.io/simulated-runtime": ["10", "x", ""],
    "scheduling.k8s.io/group-name": ["g", "", "G_bad", "x" * 300],
}
LABELS = {
    "gangscheduler.io/queue": ["team-a", "", "Team_A", "x" * 100],
    "scheduling.x-k8s.io/pod-group": ["g", "", "g/1"],
    "gangscheduler.io/role": ["worker", "", "🙂"],
}

#: JSON values of every type, small and nested, with the awkward numbers.
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["1", "1Gi", "500m", "-1", "1e9999", "0.5", "Infinity", "nan", "8x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=8,
)


def fixture(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / f"{name}.json").read_text()))


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into *obj* (dict keys and list indices), the object itself first."""
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return obj


def _drop(obj: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return obj
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return obj


@st.composite
def damaged(draw: st.DrawFn, base: dict[str, Any], max_changes: int = 3) -> dict[str, Any]:
    """*base* with up to *max_changes* fields replaced by any JSON value or removed."""
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(0, max_changes))):
        paths = _paths(obj)
        path = draw(st.sampled_from(paths[1:] if len(paths) > 1 else paths))
        if path and draw(st.booleans()) and draw(st.booleans()):
            obj = _drop(obj, path)
        else:
            obj = _set(obj, path, draw(json_values))
    return obj


@st.composite
def annotated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """*base* (a pod or PodGroup) with some of the annotations and labels the scheduler reads,
    set to values users write and to junk."""
    obj = copy.deepcopy(base)
    meta = obj.setdefault("metadata", {})
    for field, choices in (("annotations", ANNOTATIONS), ("labels", LABELS)):
        keys = draw(st.lists(st.sampled_from(sorted(choices)), unique=True, max_size=4))
        target = meta.setdefault(field, {})
        for key in keys:
            target[key] = draw(st.sampled_from(choices[key]) | st.text(max_size=8))
    return obj


def pods() -> st.SearchStrategy[dict[str, Any]]:
    """Pods: damaged, annotated, or both."""
    base = fixture("pod")
    return st.one_of(damaged(base), annotated(base), annotated(base).flatmap(damaged))


def podgroups() -> st.SearchStrategy[dict[str, Any]]:
    base = fixture("podgroup")
    return st.one_of(damaged(base), annotated(base), annotated(base).flatmap(damaged))


def nodes() -> st.SearchStrategy[dict[str, Any]]:
    return damaged(fixture("node"))


def jobs() -> st.SearchStrategy[dict[str, Any]]:
    return damaged(fixture("job"))


QUEUE = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
         "metadata": {"name": "team-a"},
         "spec": {"parent": "research", "weight": 2, "namespaces": ["team-a", "ml-*"],
                  "quotas": [{"pool": "a100", "nominal": {"nvidia.com/gpu": 16, "cpu": "192"},
                              "borrowingLimit": {"nvidia.com/gpu": 8},
                              "lendingLimit": {"nvidia.com/gpu": 4}}],
                  "preemption": {"withinQueue": "LowerPriority", "reclaimFromOthers": "Any",
                                 "minRuntimeSeconds": 600},
                  "queueing": {"strategy": "BestEffort", "backfill": True,
                               "defaultRuntimeSeconds": 3600, "reserveAfterSeconds": 900}}}
POLICY = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "SchedulerPolicy",
          "metadata": {"name": "default"},
          "spec": {"preset": "gang-scheduler", "ordering": "FairShare", "preemption": True,
                   "reservation": {"afterSeconds": 600, "maxGangs": 2}, "backfill": True,
                   "placement": {"cpsat": True, "cpsatTimeLimitSeconds": 2}}}


def queues() -> st.SearchStrategy[dict[str, Any]]:
    return damaged(QUEUE, max_changes=4)


def scheduler_policies() -> st.SearchStrategy[dict[str, Any]]:
    return damaged(POLICY, max_changes=4)
