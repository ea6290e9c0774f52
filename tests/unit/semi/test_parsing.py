"""``spec.preemption.semiPreemptible``: parsed into the queue, refused with the field named
when it is not a boolean or cannot mean anything, and mirrored by the CRD's schema (the
deploy tests check the CRD's fields against the parser's)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.parsing import parse_queue
from policies.validation import PolicyStore, parse_documents

FIELD = "spec.preemption.semiPreemptible"
_QUOTA = [{"pool": "a100", "nominal": {"nvidia.com/gpu": 16}}]


def _queue(spec: dict[str, Any], name: str = "team-a") -> dict[str, Any]:
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name}, "spec": {"namespaces": ["*"], **spec}}


def test_it_parses_and_defaults_to_off() -> None:
    q, errors = parse_queue(_queue({"parent": "org", "quotas": _QUOTA,
                                    "preemption": {"semiPreemptible": True}}))
    assert errors == [] and q is not None and q.preemption.semi_preemptible
    q, errors = parse_queue(_queue({"parent": "org", "quotas": _QUOTA}))
    assert errors == [] and q is not None and not q.preemption.semi_preemptible


@pytest.mark.parametrize(("spec", "says"), [
    ({"parent": "org", "quotas": _QUOTA, "preemption": {"semiPreemptible": "yes"}},
     "must be true or false, got 'yes'"),
    ({"parent": "org", "quotas": _QUOTA, "preemption": {"semiPreemptible": 1}},
     "must be true or false, got 1"),
    ({"quotas": _QUOTA, "preemption": {"semiPreemptible": True}},
     "only meaningful for a queue with spec.parent"),
    ({"parent": "org", "preemption": {"semiPreemptible": True}}, "needs spec.quotas"),
])
def test_a_bad_value_names_the_field(spec: dict[str, Any], says: str) -> None:
    q, errors = parse_queue(_queue(spec))
    assert q is None
    assert [(e.path, says in e.reason) for e in errors] == [(FIELD, True)], errors


def test_off_needs_neither_parent_nor_quota() -> None:
    q, errors = parse_queue(_queue({"preemption": {"semiPreemptible": False}}))
    assert errors == [] and q is not None


def test_policy_validate_reports_it_with_the_object() -> None:
    result = parse_documents([("q.yaml#1", _queue({"parent": "org", "quotas": _QUOTA})),
                              ("q.yaml#2", _queue({}, "org")),
                              ("q.yaml#3", _queue({"preemption": {"semiPreemptible": "on"}},
                                                  "team-b"))])
    (error,) = result.errors
    assert (error.obj, error.path) == ("team-b", FIELD)
    assert set(result.policies.queues.queues) == {"org", "team-a"}


def test_live_a_bad_update_is_refused_and_the_last_good_version_kept() -> None:
    store = PolicyStore()
    for obj in (_queue({}, "org"), _queue({"parent": "org", "quotas": _QUOTA,
                                          "preemption": {"semiPreemptible": True}})):
        store = store.apply(obj).store
    update = store.apply(_queue({"parent": "org", "quotas": _QUOTA,
                                 "preemption": {"semiPreemptible": "false"}}))
    assert not update.accepted and [e.path for e in update.errors] == [FIELD]
    kept = update.store.policies.queues.get("team-a")
    assert kept is not None and kept.preemption.semi_preemptible
