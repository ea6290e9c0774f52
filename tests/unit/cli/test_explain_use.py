"""``explain``'s "GPU use" section: its headline and a line per rank, flagged ones worded;
nothing without a GPU metrics source or for a gang that does not run."""

from __future__ import annotations

from scheduler.cli.explain_use import gpu_use_text, lines
from scheduler.report.utilisation import GpuSample, RankInput, by_pod, gang_use


def test_each_rank_says_what_is_wrong() -> None:
    ranks = [RankInput(str(i), f"ddp-{i}", 1) for i in range(3)]
    samples = [GpuSample("ns", "ddp-0", "0", 0.95), GpuSample("ns", "ddp-1", "0", 0.0)]
    out = lines(gang_use("ns", ranks, 4, by_pod(samples)), "5m")
    assert out[0] == ("  GPU use      48% mean over the last 5m: 1 of 3 GPUs idle (rank 1); "
                      "rank 3 missing")
    assert out[1].split() == ["rank", "0", "ddp-0", "1", "GPU(s)", "95%"]
    assert out[2].split()[-2:] == ["0%", "idle"]
    assert out[3].endswith("-  no GPU series")
    assert out[4].split() == ["rank", "3", "(no", "running", "pod)", "missing"]


def test_a_busy_gang_says_so() -> None:
    use = gang_use("ns", [RankInput("0", "p", 1)], 1, by_pod([GpuSample("ns", "p", "0", 0.9)]))
    assert lines(use, "5m")[0].endswith("90% mean over the last 5m; every rank busy")


def test_no_source_no_section() -> None:
    """Without ``gpuMetrics`` nothing is read (the cache is not even asked)."""
    assert gpu_use_text("ns/g", object(), None, 0.0) == ""
