"""Hypothesis strategies for objects no test wrote: apiserver JSON, policies, annotations.

Each strategy starts from a well-formed object (the shapes the apiserver really sends, as in
``tests/unit/kube/fixtures``) and damages it in the ways real clusters do: a field of the wrong
type, a number where a quantity belongs, a huge or negative value, a missing key, unicode, an
annotation in a form the scheduler does not read. The annotations, labels and Queue fields
tried are the scheduler's own lists (``scheduler.feed.user_fields.FIELDS``,
``policies.parsing.QUEUE_FIELDS``), each with ``ADVERSARIAL_TEXT`` or ``ADVERSARIAL_JSON``.
The converters and the grouping must turn every such object into a value or a
``ConversionError`` naming the field, never crash.

``FUZZ_EXAMPLES`` (environment variable ``GANG_SCHEDULER_FUZZ_EXAMPLES``, default 200) is how
many objects each property tries; the reliability run sets 10,000.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from policies.parsing import POLICY_FIELDS, QUEUE_FIELDS
from scheduler.feed import user_fields

FIXTURES = Path(__file__).parents[1] / "kube" / "fixtures"
FUZZ_EXAMPLES = int(os.environ.get("GANG_SCHEDULER_FUZZ_EXAMPLES", "200"))

#: Text no annotation or label should be read from as if it were fine: huge, negative, far
#: future and past, non-ASCII digits, overflowing, empty, whitespace, NaN/inf, very long. Every
#: field of ``scheduler.feed.user_fields.FIELDS`` is tried with each (and with its example).
ADVERSARIAL_TEXT: tuple[str, ...] = (
    "", " ", "\t\n", "0", "1", "-1", "-5s", "999999999999", "99999999999999999999",
    "1e999", "-1e999", "1e-999", "nan", "NaN", "inf", "-inf", "Infinity",
    "99999999999999999999d", "P99999999999999999999D", "PT99999999999999999999S", "366d",
    "2h\n", "\uff19", "\u0663", "\uff12h", "\u0663\u0660m", "\u00b2", "PT2\u017f",
    "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2999-01-01T00:00:00Z",
    "2026-11-30T09:00:00+14:00", "1970-01-01T00:00:00Z", "\U0001f642", "x" * 10_000,
    "9" * 400, "-" * 63, "a/b", "0x10", "1_000", "\x00", "\u202eevil",
)
#: The same for Queue and SchedulerPolicy fields, which are typed JSON.
ADVERSARIAL_JSON: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, -(2**63), 2**63, 2**64, 10**30, 1e308, -1e308, 1e-308,
    float("nan"), float("inf"), float("-inf"), "", " ", "nan", "inf", "1e999",
    "99999999999999999999Ti", "\uff18", "\u0663", "-1", "0.5", "x" * 10_000, [], {},
    [None], {"": None}, "\U0001f642",
)


def field_values(field: user_fields.UserField) -> tuple[str, ...]:
    """What a field is tried with: its example (a value that reads well) and the junk."""
    return (field.example, *ADVERSARIAL_TEXT)


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
def annotated(draw: st.DrawFn, base: dict[str, Any], kind: str) -> dict[str, Any]:
    """*base* (an object of *kind*) with some of the annotations and labels the scheduler
    reads on that kind (``scheduler.feed.user_fields``), set to values users write and to junk."""
    obj = copy.deepcopy(base)
    meta = obj.setdefault("metadata", {})
    for where in ("annotation", "label"):
        fields = user_fields.on(kind, where)
        if not fields:
            continue
        chosen = draw(st.lists(st.sampled_from(fields), unique_by=lambda f: f.key, max_size=4))
        target = meta.setdefault(f"{where}s", {})
        for field in chosen:
            target[field.key] = draw(st.sampled_from(field_values(field)) | st.text(max_size=8))
    return obj


def _of(kind: str, fixture_name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Objects of *kind*: damaged, annotated, or both."""
    base = fixture(fixture_name)
    return st.one_of(damaged(base), annotated(base, kind),
                     annotated(base, kind).flatmap(damaged))


def pods() -> st.SearchStrategy[dict[str, Any]]:
    return _of("Pod", "pod")


def podgroups() -> st.SearchStrategy[dict[str, Any]]:
    return _of("PodGroup", "podgroup")


def nodes() -> st.SearchStrategy[dict[str, Any]]:
    return _of("Node", "node")


def jobs() -> st.SearchStrategy[dict[str, Any]]:
    return _of("Job", "job")


QUEUE = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
         "metadata": {"name": "team-a"},
         "spec": {"parent": "research", "weight": 2, "namespaces": ["team-a", "ml-*"],
                  "quotas": [{"pool": "a100", "nominal": {"nvidia.com/gpu": 16, "cpu": "192"},
                              "borrowingLimit": {"nvidia.com/gpu": 8},
                              "lendingLimit": {"nvidia.com/gpu": 4}}],
                  "preemption": {"withinQueue": "LowerPriority", "reclaimFromOthers": "Any",
                                 "minRuntimeSeconds": 600, "semiPreemptible": True},
                  "queueing": {"strategy": "BestEffort", "backfill": True,
                               "defaultRuntimeSeconds": 3600, "reserveAfterSeconds": 900,
                               "ownerFairness": True},
                  "guards": {"maxRuntimeSeconds": 43200,
                             "budget": {"gpuHours": 1000, "period": "Week"},
                             "maxRunningGangs": 20, "maxPendingGangs": 100},
                  "interactive": {"maxGPUsPerUser": 4, "maxGangsPerUser": 2,
                                  "userLabel": "gangscheduler.io/user"}}}
POLICY = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "SchedulerPolicy",
          "metadata": {"name": "default"},
          "spec": {"preset": "gang-scheduler", "ordering": "FairShare", "preemption": True,
                   "reservation": {"afterSeconds": 600, "maxGangs": 2}, "backfill": True,
                   "placement": {"cpsat": True, "cpsatTimeLimitSeconds": 2}}}


def set_field(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """*obj* with the field at *path* (as ``policies.parsing.QUEUE_FIELDS`` writes it: ``[]``
    the first item of a list, ``{}`` the GPU of a resource mapping) set to *value*; what is
    in the way (a missing or non-mapping parent) is replaced."""
    steps: list[Any] = []
    for token in path.split("."):
        if token.endswith("[]"):
            steps += [token[:-2], 0]
        elif token.endswith("{}"):
            steps += [token[:-2], "nvidia.com/gpu"]
        else:
            steps.append(token)
    target: Any = obj
    for step, after in itertools.pairwise(steps):
        want = list if isinstance(after, int) else dict
        child = target[step] if isinstance(target, list) or step in target else None
        if not isinstance(child, want) or (not child and want is list):
            child = target[step] = [{}] if want is list else {}
        target = child
    target[steps[-1]] = value
    return obj


@st.composite
def fielded(draw: st.DrawFn, base: dict[str, Any], paths: tuple[str, ...]) -> dict[str, Any]:
    """*base* with one to three of its fields (*paths*) set to adversarial JSON values."""
    obj = copy.deepcopy(base)
    for path in draw(st.lists(st.sampled_from(paths), unique=True, min_size=1, max_size=3)):
        set_field(obj, path, draw(st.sampled_from(ADVERSARIAL_JSON) | json_values))
    return obj


def queues() -> st.SearchStrategy[dict[str, Any]]:
    """Queues: damaged anywhere, or with the fields the parser reads set to junk."""
    return st.one_of(damaged(QUEUE, max_changes=4), fielded(QUEUE, QUEUE_FIELDS))


def scheduler_policies() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(damaged(POLICY, max_changes=4), fielded(POLICY, POLICY_FIELDS))
