"""JobSet JSON -> JobSetInfo: defaults as the API has them, errors naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kube.read.convert import ConversionError
from scheduler.kube.read.jobset_convert import jobset_from_json
from scheduler.model.workloads import ReplicatedJobInfo


def jobset(*rjobs: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "pair", "namespace": "team-a", "uid": "u1",
                         "creationTimestamp": "2026-12-01T09:00:00Z", **meta},
            "spec": {"replicatedJobs": list(rjobs)},
            "status": {"restarts": 3}}


def test_a_trainer_like_jobset() -> None:
    got = jobset_from_json(jobset(
        {"name": "dataset-initializer", "template": {"spec": {}}},
        {"name": "node", "replicas": 1, "dependsOn": [{"name": "dataset-initializer",
                                                       "status": "Complete"}],
         "template": {"spec": {"parallelism": 4, "completions": 4}}},
        annotations={"gangscheduler.io/gang-scope": "jobset"}))
    assert got.key == "team-a/pair" and got.uid == "u1"
    assert got.replicated_jobs == (
        ReplicatedJobInfo("dataset-initializer", 1, 1, None),
        ReplicatedJobInfo("node", 1, 4, 4, ("dataset-initializer",)))
    assert got.annotations == {"gangscheduler.io/gang-scope": "jobset"}
    assert got.creation_time == 1796115600.0


def test_status_does_not_matter() -> None:
    a = jobset({"name": "w", "template": {"spec": {}}})
    b = {**a, "status": {"restarts": 4, "conditions": [{"type": "Completed"}]}}
    assert jobset_from_json(a) == jobset_from_json(b)


@pytest.mark.parametrize(("rjob", "message"), [
    ({"template": {"spec": {}}}, "spec.replicatedJobs[0].name: missing"),
    ({"name": "w", "replicas": -1}, "spec.replicatedJobs[0].replicas: must be >= 0"),
    ({"name": "w", "template": {"spec": {"parallelism": "4"}}},
     "spec.replicatedJobs[0].template.spec.parallelism: expected an integer"),
    ({"name": "w", "dependsOn": [{"status": "Ready"}]},
     "spec.replicatedJobs[0].dependsOn[0].name: missing"),
    ("w", "spec.replicatedJobs[0]: expected an object"),
])
def test_errors_name_the_field(rjob: Any, message: str) -> None:
    with pytest.raises(ConversionError) as err:
        jobset_from_json(jobset(rjob))
    assert str(err.value) == f"jobset team-a/pair: {message}" or \
        str(err.value).startswith(f"jobset team-a/pair: {message}"), str(err.value)


@pytest.mark.parametrize(("policy", "in_order"), [
    (None, False), ({}, False), ({"startupPolicyOrder": "AnyOrder"}, False),
    ({"startupPolicyOrder": "InOrder"}, True),
])
def test_the_startup_policy(policy: dict[str, str] | None, in_order: bool) -> None:
    body = jobset({"name": "driver"}, {"name": "workers"})
    if policy is not None:
        body["spec"]["startupPolicy"] = policy
    assert jobset_from_json(body).in_order is in_order


@pytest.mark.parametrize(("policy", "message"), [
    ({"startupPolicyOrder": "inorder"},
     "spec.startupPolicy.startupPolicyOrder: expected InOrder or AnyOrder, got 'inorder'"),
    ("InOrder", "spec.startupPolicy: expected an object, got str"),
])
def test_a_startup_policy_it_cannot_read_names_the_field(policy: Any, message: str) -> None:
    body = jobset({"name": "driver"})
    body["spec"]["startupPolicy"] = policy
    with pytest.raises(ConversionError) as err:
        jobset_from_json(body)
    assert str(err.value) == f"jobset team-a/pair: {message}"
