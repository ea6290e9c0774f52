"""The README's "Under Kueue" block, run as written on a fresh dev cluster with Kueue.

Its lines run in order, as a person pasting them would (``\\`` continuations joined): each in
bash with what the earlier lines set (``eval "$(... env)"``), a line ending in ``&`` in the
background. After the last line, Kueue must have admitted the example Job and gang-scheduler
must have bound its 8 pods, each with the flavor's node selector Kueue injected. The cluster
gets a state directory of its own (``GANG_SCHEDULER_DEV_CLUSTER_DIR``).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import recipe
from tests.e2e.cluster_api import wait_for
from tests.e2e.test_deploy_support import stop_process

pytestmark = pytest.mark.e2e

HEADING = "### Under Kueue"


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment the block's lines run in (``recipe.shell``)."""
    yield from recipe.shell(tmp_path)


def kubectl_items(env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    """``kubectl get ... -o json``'s items."""
    out = subprocess.run(["kubectl", "get", *args, "-o", "json"], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return list(json.loads(out)["items"])


def test_the_readme_block_runs_a_job_under_kueue(shell: dict[str, str], tmp_path: Path) -> None:
    env, started = shell, time.monotonic()
    background: list[subprocess.Popen[bytes]] = []
    try:
        for line in recipe.readme_block(HEADING):
            recipe.run_line(line, env, tmp_path, background, timeout=900)

        def bound_whole() -> list[dict[str, Any]]:
            pods = kubectl_items(env, "pods", "-n", "default", "-l",
                                 "batch.kubernetes.io/job-name=train-a")
            return pods if len(pods) == 8 and all(p["spec"].get("nodeName") for p in pods) \
                else []

        pods = wait_for(bound_whole, 180, what="the example Job's 8 pods bound")
        assert {p["spec"]["nodeSelector"].get("gangscheduler.io/pool") for p in pods} == \
            {"a100"}, "Kueue injected its flavor's node selector"
        [workload] = kubectl_items(env, "workloads.kueue.x-k8s.io", "-n", "default")
        conditions = {c["type"]: c["status"] for c in workload["status"]["conditions"]}
        assert conditions.get("Admitted") == "True", workload["status"]
        print(f"[kueue recipe] {time.monotonic() - started:.1f}s")
    finally:
        for proc in background:
            stop_process(proc)
