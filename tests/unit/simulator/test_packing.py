"""The packing experiment (issue 36, item 4): its loaders keep fractions and name bad fields,
its protocol draws pods until 130% of the GPUs are asked for and reads the allocation at
every arrived load, and the report writes what it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cli.main import main
from scheduler.placement.gpu_shares import MILLI, NodeState, Policy, ShareRequest
from simulator import packing, packing_report
from simulator.trace import TraceError

POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_pods_keep_their_fractions_and_models(tmp_path: Path) -> None:
    path = write(tmp_path, "pods.csv", POD_HEADER + "p0,6000,12288,1,460,\n"
                 "p1,12000,24576,1,1000,V100M32|G2\np2,4000,1024,0,0,\np3,8000,2048,4,1000,\n")
    assert packing.load_requests(path) == (
        ShareRequest(6000, 12288, 1, 460), ShareRequest(12000, 24576, 1, 1000,
                                                        frozenset({"V100M32", "G2"})),
        ShareRequest(4000, 1024, 0), ShareRequest(8000, 2048, 4))


@pytest.mark.parametrize(("row", "field"), [
    ("p,1,1,2,500,", "gpu_milli"),  # a share of several GPUs
    ("p,1,1,1,1500,", "gpu_milli"),
    ("p,1,1,0,300,", "gpu_milli"),
    ("p,x,1,1,1000,", "cpu_milli"),
    ("p,1,1,-1,1000,", "num_gpu"),
])
def test_a_bad_pod_row_names_its_line_and_field(tmp_path: Path, row: str, field: str) -> None:
    path = write(tmp_path, "pods.csv", POD_HEADER + row + "\n")
    with pytest.raises(TraceError) as info:
        packing.load_requests(path)
    assert info.value.column == field and info.value.line == 2, info.value


def test_nodes_start_with_every_gpu_free(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes.csv", NODE_HEADER + "n0,32000,262144,0,\nn1,96000,393216,8,G2\n")
    assert packing.load_nodes(path) == {"n0": NodeState(32000, 262144, (), ""),
                                        "n1": NodeState(96000, 393216, (MILLI,) * 8, "G2")}


def test_arrivals_are_seeded_draws_until_130_percent_is_asked() -> None:
    pods = (ShareRequest(1, 1, 1, 250), ShareRequest(1, 1, 2), ShareRequest(1, 1, 0))
    drawn = packing.arrivals(pods, 10 * MILLI, seed=3)
    asked = sum(r.shares for r in drawn)
    assert asked >= 13 * MILLI and asked - drawn[-1].shares < 13 * MILLI
    assert drawn == packing.arrivals(pods, 10 * MILLI, seed=3)
    assert drawn != packing.arrivals(pods, 10 * MILLI, seed=4)


NODES = {f"n{i}": NodeState(16_000, 65_536, (MILLI,) * 4, "V100") for i in range(8)}
PODS = (ShareRequest(2000, 4096, 1, 300), ShareRequest(2000, 4096, 1, 600),
        ShareRequest(4000, 8192, 2), ShareRequest(2000, 4096, 1), ShareRequest(1000, 1024, 0))


@pytest.mark.parametrize("policy", list(Policy))
def test_a_run_reads_the_allocation_at_every_load_and_never_more_than_was_asked(
        policy: Policy) -> None:
    curve = packing.run(NODES, PODS, policy, seed=0)
    assert len(curve.allocated) == len(packing.LOADS)
    assert list(curve.allocated) == sorted(curve.allocated)  # pods never leave
    for load, allocated in zip(packing.LOADS, curve.allocated, strict=True):
        # (the pod that crosses a mark is counted whole: up to 2 of the 32 GPUs more)
        assert allocated <= min(load, 1.0) + 2 / 32
    assert curve.allocated[-1] <= 1.0 and curve.failed > 0  # 130% cannot all fit
    assert packing.run(NODES, PODS, policy, seed=0) == curve


def test_the_report_tables_means_and_writes_csv_and_plot(tmp_path: Path) -> None:
    exp = packing_report.experiment("default", NODES, PODS, [Policy.BEST_FIT, Policy.RANDOM],
                                    seeds=[0, 1], jobs=1)
    text = packing_report.table(exp)
    assert "mean of 2 seed(s)" in text and "| best-fit |" in text and "| random |" in text
    assert "FGD 95.2%" in text  # the paper's figure for this trace, beside
    packing_report.write_csv(exp, tmp_path / "p.csv")
    rows = (tmp_path / "p.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2 * len(packing.LOADS)
    packing_report.plot(exp, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_the_command_on_the_shipped_sample_writes_its_files(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    out = tmp_path / "out"
    code = main(["packing", "--seeds", "1", "--jobs", "1", "--policy", "best-fit",
                 "--no-progress", "--out", str(out)])
    assert code == 0
    assert {p.name for p in out.iterdir()} == {"packing.csv", "packing.md", "packing.png"}
    assert "| best-fit |" in capsys.readouterr().out


def test_the_command_refuses_a_bad_pod_list_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "pods.csv", POD_HEADER + "p,1,1,1,1500,\n")
    monkeypatch.chdir(tmp_path)  # a path relative to where the user is
    assert main(["packing", "--pods", "pods.csv", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "pods.csv:2: gpu_milli: must be <= 1000, got 1500" in err, err
    assert main(["packing", "--pods", "no-such.csv", "--no-progress"]) == 2
    assert "no shipped sample 'no-such.csv'" in capsys.readouterr().err
