"""The README's "Under Kueue" block, run as written on a fresh dev cluster with Kueue.

Its lines run in order, as a person pasting them would (``\\`` continuations joined): each in
bash with what the earlier lines set (``eval "$(... env)"``), a line ending in ``&`` in the
background. After the last line, Kueue must have admitted the example Job and gang-scheduler
must have bound its 8 pods, each with the flavor's node selector Kueue injected. The cluster
gets a state directory of its own (``GANG_SCHEDULER_DEV_CLUSTER_DIR``).
"""

from __future__ import annotations

import time

import pytest

from tests.e2e import recipe

pytestmark = pytest.mark.e2e

HEADING = "### Under Kueue"


def test_the_readme_block_runs_a_job_under_kueue(recipe_shell: recipe.Shell) -> None:
    started = time.monotonic()
    recipe_shell.run_block(HEADING)

    pods = recipe_shell.bound_pods(8, "default", "batch.kubernetes.io/job-name=train-a",
                                   "the example Job's 8 pods bound")
    assert {p["spec"]["nodeSelector"].get("gangscheduler.io/pool") for p in pods} == \
        {"a100"}, "Kueue injected its flavor's node selector"
    [workload] = recipe_shell.kubectl_items("workloads.kueue.x-k8s.io", "-n", "default")
    conditions = {c["type"]: c["status"] for c in workload["status"]["conditions"]}
    assert conditions.get("Admitted") == "True", workload["status"]
    print(f"[kueue recipe] {time.monotonic() - started:.1f}s")
