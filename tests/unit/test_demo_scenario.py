"""The demo's shipped files (cluster, queues, jobs) and the manifests each job becomes."""

from __future__ import annotations

import pytest
import yaml

from policies.validation import read_files
from scheduler.tools.demo import scenario
from scheduler.world import clusterspec


def test_the_shipped_story_parses_and_fits_the_shipped_cluster_and_queues() -> None:
    jobs = scenario.load()
    spec = clusterspec.load(scenario.DEMO_DIR / "cluster.yaml")
    capacity: dict[str, int] = {}
    for node in spec.nodes():
        capacity[node.pool] = capacity.get(node.pool, 0) + int(node.allocatable[scenario.GPU])
    assert capacity == {"a100": 32, "h100": 32}
    result = read_files([scenario.DEMO_DIR / "queues.yaml"])
    assert result.errors == ()
    queues = {q.name: q for q in result.policies.queues}
    assert set(queues) == {"research", "team-a", "team-b"}
    assert {j.team for j in jobs} == {"team-a", "team-b"}
    for job in jobs:
        assert job.pool in capacity and job.gpus <= capacity[job.pool], job
        assert job.gpus_per_worker <= 8, "a worker must fit one 8-GPU node"
    # The acts the README and the summary talk about are in the story.
    names = {j.name: j for j in jobs}
    assert names["a-ddp"].gpus + names["b-ddp"].gpus > 32 - names["b-warmup"].gpus
    assert names["b-llm"].gpus == capacity["h100"]
    assert names["a-urgent"].priority == "gang-high" and names["a-bulk"].priority == "gang-low"


def test_pods_carry_everything_the_scheduler_and_the_fake_kubelet_read() -> None:
    job = scenario.JobSpec("j", "team-a", "a100", 2, 4, runtime=20, expected=30,
                           priority="gang-low")
    pods = scenario.pods(job, attempt=0, runtime=20, speed=4)
    assert [p["metadata"]["name"] for p in pods] == ["j-0", "j-1"]
    pod = pods[0]
    assert pod["spec"]["schedulerName"] == "gang-scheduler"
    assert pod["spec"]["priorityClassName"] == "gang-low"
    assert pod["spec"]["nodeSelector"] == {scenario.DEFAULT_POOL_LABEL: "a100"}
    assert pod["metadata"]["labels"][scenario.POD_GROUP_LABEL] == "j"
    assert pod["metadata"]["labels"][scenario.QUEUE_LABEL] == "team-a"
    res = pod["spec"]["containers"][0]["resources"]
    assert res["requests"][scenario.GPU] == res["limits"][scenario.GPU] == "4"
    notes = pod["metadata"]["annotations"]
    assert notes[scenario.SIMULATED_RUNTIME] == "5"  # 20 s at speed 4
    assert notes[scenario.EXPECTED_RUNTIME_ANNOTATION] == "7.5"
    # A resumed attempt: new names, less left to run, a proportionally smaller estimate.
    again = scenario.pods(job, attempt=1, runtime=10, speed=4)
    assert again[0]["metadata"]["name"] == "j-r1-0"
    assert again[0]["metadata"]["labels"][scenario.ATTEMPT_LABEL] == "1"
    assert again[0]["metadata"]["annotations"][scenario.SIMULATED_RUNTIME] == "2.5"
    assert again[0]["metadata"]["annotations"][scenario.EXPECTED_RUNTIME_ANNOTATION] == "3.75"
    group = scenario.pod_group(job)
    assert group["spec"] == {"minMember": 2}
    assert group["metadata"]["labels"][scenario.QUEUE_LABEL] == "team-a"


@pytest.mark.parametrize(("text", "error"), [
    ("jobs: 3", "jobs: must be a list"),
    ("jobs: [{name: a, team: t, pool: p, workers: 1, runtime: 1}]", "jobs[0].gpusPerWorker"),
    ("jobs: [{name: a, team: t, pool: p, workers: 0, gpusPerWorker: 1, runtime: 1}]",
     "jobs[0]: workers >= 1"),
    ("jobs: [{name: a, team: t, pool: p, workers: 1, gpusPerWorker: 1, runtime: 1,"
     " after: [b started]}]", "jobs[0].after[0]: no other job named 'b'"),
    ("jobs: [{name: a, team: t, pool: p, workers: 1, gpusPerWorker: 1, runtime: 1,"
     " after: [a began]}]", "jobs[0].after[0]: expected"),
])
def test_errors_name_the_field(text: str, error: str) -> None:
    with pytest.raises(scenario.ScenarioError, match=error.replace("[", r"\[")
                       .replace("]", r"\]").replace("(", r"\(")):
        scenario.parse(yaml.safe_load(text))
