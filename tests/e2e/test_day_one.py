"""Day one: the README's "A local control plane" block, run as written on a fresh dev cluster.

Issue 32: the block started a cluster and the scheduler but applied neither deploy/ nor
deploy/queues, so the first example failed with "no PriorityClass gang-normal". Here the
block is read from README.md and its lines run in order, as a person pasting them would: each
in bash with what the earlier lines set (``eval "$(... env)"``), a line ending in ``&`` in
the background. Before the last line (``dev-cluster down``) the example's gang must be bound
whole and ``gangs`` must show it under its Job's name. The cluster gets a state directory of
its own (``GANG_SCHEDULER_DEV_CLUSTER_DIR``): the session's and a developer's are untouched.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e import recipe
from tests.e2e.cluster_api import wait_for

pytestmark = pytest.mark.e2e

HEADING = "## A local control plane"


def job_pods(env: dict[str, str]) -> dict[str, str]:
    """The example Job's pods -> their node ("" while pending)."""
    out = subprocess.run(["kubectl", "-n", "team-a", "get", "pods", "-l",
                          "batch.kubernetes.io/job-name=ddp-train", "-o", "json"], env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "")
            for p in json.loads(out)["items"]}


def test_the_readme_block_runs_the_first_example(recipe_shell: recipe.Shell) -> None:
    env = recipe_shell.env
    for line in recipe.readme_block(HEADING):
        if line.endswith("dev-cluster down"):
            def bound_whole() -> dict[str, str]:
                nodes = job_pods(env)
                return nodes if len(nodes) == 4 and all(nodes.values()) else {}

            wait_for(bound_whole, 180, what="the example's 4 pods bound")
            gangs = subprocess.run(["gang-scheduler", "gangs", "-n", "team-a", "-o", "json"],
                                   env=env, cwd=recipe.REPO, capture_output=True, text=True,
                                   timeout=120, check=True).stdout
            running = json.loads(gangs)["running"]
            assert [g["workload"] for g in running] == ["Job/ddp-train"], running
        recipe_shell.run_line(line, timeout=600)
