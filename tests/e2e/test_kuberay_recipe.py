"""The README's "With KubeRay" block, run as written on a fresh dev cluster with KubeRay.

Its lines run in order, as a person pasting them would (``recipe.Shell.run_block``). After the last
line, gang-scheduler must have bound the example RayCluster's 4 pods (a head and 3 GPU
workers, one gang sized from the RayCluster) and KubeRay must call the cluster ``ready``. The
cluster gets a state directory of its own (``GANG_SCHEDULER_DEV_CLUSTER_DIR``).
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.e2e import recipe
from tests.e2e.cluster_api import wait_for

pytestmark = pytest.mark.e2e

HEADING = "### With KubeRay"


def ray_state(env: dict[str, str]) -> str:
    """KubeRay's word for the example RayCluster (``status.state``; "" before it has one)."""
    out = subprocess.run(["kubectl", "-n", "team-a", "get", "raycluster", "ray-train", "-o",
                          "json"], env=env, capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return str((json.loads(out).get("status") or {}).get("state", ""))


def test_the_readme_block_runs_a_raycluster_whole(recipe_shell: recipe.Shell) -> None:
    started = time.monotonic()
    recipe_shell.run_block(HEADING)

    pods = recipe_shell.bound_pods(4, "team-a", "ray.io/cluster=ray-train",
                                   "the RayCluster's 4 pods bound")
    roles = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods)
    assert roles == ["head", "worker", "worker", "worker"], roles
    wait_for(lambda: ray_state(recipe_shell.env) == "ready", 120,
             what="KubeRay calling ray-train ready")
    print(f"[kuberay recipe] {time.monotonic() - started:.1f}s")
