"""The README's "With KubeRay" block, run as written on a fresh dev cluster with KubeRay.

Its lines run in order, as a person pasting them would (``recipe.run_line``). After the last
line, gang-scheduler must have bound the example RayCluster's 4 pods (a head and 3 GPU
workers, one gang sized from the RayCluster) and KubeRay must call the cluster ``ready``. The
cluster gets a state directory of its own (``GANG_SCHEDULER_DEV_CLUSTER_DIR``).
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

HEADING = "### With KubeRay"


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment the block's lines run in (``recipe.shell``)."""
    yield from recipe.shell(tmp_path)


def kubectl_json(env: dict[str, str], *args: str) -> dict[str, Any]:
    out = subprocess.run(["kubectl", "-n", "team-a", "get", *args, "-o", "json"], env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return dict(json.loads(out))


def test_the_readme_block_runs_a_raycluster_whole(shell: dict[str, str],
                                                   tmp_path: Path) -> None:
    env, started = shell, time.monotonic()
    background: list[subprocess.Popen[bytes]] = []
    try:
        for line in recipe.readme_block(HEADING):
            recipe.run_line(line, env, tmp_path, background, timeout=900)

        def bound_whole() -> list[dict[str, Any]]:
            pods = kubectl_json(env, "pods", "-l", "ray.io/cluster=ray-train")["items"]
            return pods if len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods) \
                else []

        pods = wait_for(bound_whole, 180, what="the RayCluster's 4 pods bound")
        roles = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods)
        assert roles == ["head", "worker", "worker", "worker"], roles
        wait_for(lambda: (kubectl_json(env, "raycluster", "ray-train").get("status") or {})
                 .get("state") == "ready", 120, what="KubeRay calling ray-train ready")
        print(f"[kuberay recipe] {time.monotonic() - started:.1f}s")
    finally:
        for proc in background:
            stop_process(proc)
