"""The README's training-operator v1 block, run as written on a fresh dev cluster with the
real Kubeflow training-operator (v1.8.1).

Its lines run in order, as a person pasting them would (``recipe.Shell.run_block``). After the last
line the operator must have made the example PyTorchJob's 4 pods (no PodGroup) and
gang-scheduler must have bound all 4, sized from the PyTorchJob alone. The cluster gets a
state directory of its own (``GANG_SCHEDULER_DEV_CLUSTER_DIR``).
"""

from __future__ import annotations

import time

import pytest

from tests.e2e import recipe
from tests.e2e.pytorchjob_support import JOB_NAME_LABEL

pytestmark = pytest.mark.e2e

HEADING = "### Kubeflow training-operator v1 (PyTorchJob)"


def test_the_readme_block_runs_a_pytorchjob_as_one_gang(recipe_shell: recipe.Shell) -> None:
    started = time.monotonic()
    recipe_shell.run_block(HEADING)

    pods = recipe_shell.bound_pods(4, "team-a", f"{JOB_NAME_LABEL}=ptj-train",
                                   "the example PyTorchJob's 4 pods bound")
    assert sorted(p["metadata"]["name"] for p in pods) == [
        "ptj-train-master-0", "ptj-train-worker-0", "ptj-train-worker-1",
        "ptj-train-worker-2"]
    assert {o["kind"] for p in pods for o in p["metadata"]["ownerReferences"]} == \
        {"PyTorchJob"}
    assert recipe_shell.kubectl_items("podgroups.scheduling.x-k8s.io", "-n", "team-a") == [], \
        "the operator's own gang scheduling is off: no PodGroup"
    print(f"[pytorchjob recipe] {time.monotonic() - started:.1f}s")
