"""The kwok benchmarks run end to end, at a tiny size, and print their figures.

Why here: their documented commands need a cluster for many minutes, which no test can
afford; this runs each script as a user would (its own throwaway dev cluster, no training
operators) on a few nodes and pods, so a broken script fails CI rather than the next person
who measures. The figures themselves are not checked: a loaded CI machine gives any number.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.tools.devcluster import build
from tests.e2e.cluster_api import ControlPlane

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]

CASES = {
    "bench_fair.py": (["--nodes", "4", "--bound", "8", "--pods", "16", "--rounds", "2",
                       "--contenders", "kube-fast,gang-groups", "--concurrencies", "2,4"],
                      ["pods/s to the last binding reply (", "to the last pod Running)",
                       "the limit: ", "round 2 kube-fast: 16 bound",
                       "round 2 gang-groups: 16 bound",
                       "gang-groups / kube-fast (medians): throughput from process start"]),
    "bench_versus.py": (["--nodes", "4", "--pods", "16", "--contenders", "kube-fast,gang-groups"],
                        ["gang-groups / kube-fast: throughput from process start"]),
    "bench_stream.py": (["--nodes", "4", "--gang-size", "2", "--rate", "1", "--duration", "4",
                         "--runtime", "5"],
                        ["last member created -> last member bound (watch): p50"]),
    # 15 samples a second apart: the trend needs 5, which a loaded machine still gives.
    "bench_soak.py": (["--nodes", "4", "--gang-size", "2", "--rate", "0.5", "--runtime", "3",
                       "--duration", "15", "--sample", "1"],
                      ["RSS, median of the first and last fifth", "cycle time, median of",
                       "plot: "]),
    "bench_scale.py": (["--nodes", "4", "--pods", "16", "--big-gang", "8", "--stall", "120"],
                       ["Ready in", "backlog: 16 of 16 bound;", "pods/s from process start",
                        "one 8-pod gang on top: last member created -> last bound",
                        "cycles that bound something", "every cycle (",
                        "scheduler: CPU", "kube-apiserver: RSS", "etcd: RSS"]),
    "bench_idle.py": (["--gangs", "2", "--settle", "1", "--seconds", "2"],
                      ["decision cycles (gang_scheduler_cycles_total)", "scheduler CPU seconds",
                       "their series counts, summed"]),
    "bench_kai.py": (["--nodes", "4", "--gang", "8", "--reclaims", "1", "--stall", "120"],
                     ["1. one 8-pod job: last member created -> last bound",
                      "every member marked Unschedulable", "3. cluster fill: 32 of 32",
                      "4. reclaim one GPU:"]),
}


@pytest.mark.parametrize("script", sorted(CASES))
def test_a_kwok_benchmark_runs_and_prints_its_figures(script: str, tmp_path: Path) -> None:
    build.ensure_all(log=lambda line: None, operators=False)
    args, expected = CASES[script]
    proc = subprocess.run([sys.executable, f"benchmarks/{script}", *args,
                           "--workdir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for text in expected:
        assert text in proc.stdout, (text, proc.stdout[-3000:], proc.stderr[-2000:])


def test_the_list_encoding_benchmark_reads_a_running_cluster(control_plane: ControlPlane
                                                             ) -> None:
    """``bench_list_encoding.py`` needs a cluster that is already up (its ``--state-dir``):
    on the session cluster, with a pod of this test's, it lists in both encodings and
    counts that pod among the JSON list's."""
    namespace = control_plane.new_namespace()
    control_plane.create_pod(namespace, "listed", scheduler_name="nobody")  # stays pending
    proc = subprocess.run([sys.executable, "benchmarks/bench_list_encoding.py", "--state-dir",
                           str(control_plane.cluster.state_dir), "--rounds", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    json_line, protobuf_line = proc.stdout.splitlines()
    assert json_line.startswith("round 1 json") and "apiserver CPU" in json_line
    assert int(json_line.split(" pods (")[0].rsplit(" ", 1)[1]) >= 1
    assert protobuf_line.startswith("round 1 vnd.kubernetes.protobuf")
