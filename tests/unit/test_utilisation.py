"""Joining a gang's ranks with its GPU metrics (``scheduler.report.utilisation``): which ranks
are idle, lag the gang's median, are not seen by the exporter, or are missing altogether."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.report.utilisation import (
    GpuSample,
    RankInput,
    Thresholds,
    by_pod,
    gang_use,
)

NS = "team-a"


def ranks(n: int, gpus: int = 1) -> list[RankInput]:
    return [RankInput(str(i), f"train-{i}", gpus) for i in range(n)]


def samples(utils: dict[int, list[float]]) -> list[GpuSample]:
    return [GpuSample(NS, f"train-{r}", str(d), u) for r, devices in utils.items()
            for d, u in enumerate(devices)]


@pytest.mark.parametrize(("utils", "size", "flags", "idle", "missing", "summary"), [
    # Everyone busy: nothing to say.
    ({0: [0.9], 1: [0.92], 2: [0.95], 3: [0.9]}, 4, ["", "", "", ""], 0, (), ""),
    # Rank 2 holds its GPU and does nothing.
    ({0: [0.9], 1: [0.92], 2: [0.0], 3: [0.9]}, 4, ["", "", "idle", ""], 1, (),
     "1 of 4 GPUs idle (rank 2)"),
    # Rank 3 at 40% while the median is 91%: a straggler.
    ({0: [0.9], 1: [0.92], 2: [0.95], 3: [0.4]}, 4, ["", "", "", "straggler"], 0, (),
     "rank 3 lags: 40% vs median 91%"),
    # The whole gang idles (stuck before its first step): idle, nobody lags.
    ({0: [0.01], 1: [0.0], 2: [0.02], 3: [0.0]}, 4, ["idle"] * 4, 4, (),
     "4 of 4 GPUs idle (rank 0, rank 1, rank 2, rank 3)"),
    # Low but working: below the floor nobody is named a straggler.
    ({0: [0.15], 1: [0.12], 2: [0.06], 3: [0.14]}, 4, ["", "", "", ""], 0, (), ""),
    # Rank 1 runs without a series: unseen, not idle; the gang of 4 lacks rank 3.
    ({0: [0.9], 2: [0.9]}, 4, ["", "unseen", ""], 0, ("3",), "rank 3 missing"),
])
def test_gang_use(utils: dict[int, list[float]], size: int, flags: list[str], idle: int,
                  missing: tuple[str, ...], summary: str) -> None:
    present = [r for r in ranks(4) if int(r.rank) < len(flags)]
    use = gang_use(NS, present, size, by_pod(samples(utils)))
    assert [r.flag for r in use.ranks] == flags
    assert use.idle_gpus == idle
    assert use.missing == missing
    assert use.summary == summary
    assert use.flagged == bool(summary)


def test_one_idle_device_of_a_rank_counts_without_flagging_the_rank() -> None:
    """A 2-GPU rank with one device idle: 1 idle GPU, the rank itself works."""
    use = gang_use(NS, ranks(2, gpus=2), 2, by_pod(samples({0: [0.9, 0.0], 1: [0.9, 0.9]})))
    assert use.idle_gpus == 1
    assert [r.flag for r in use.ranks] == ["", ""]
    assert use.summary == "1 of 4 GPUs idle"


def test_other_namespaces_samples_do_not_join() -> None:
    """A pod of the same name in another namespace is another pod."""
    other = [GpuSample("team-b", "train-0", "0", 0.0)]
    use = gang_use(NS, ranks(1), 1, by_pod(other))
    assert use.ranks[0].flag == "unseen" and use.idle_gpus == 0


def test_named_ranks_have_no_missing() -> None:
    """Without numeric ranks nothing says which member is absent."""
    named = [RankInput("head", "ray-head", 1)]
    assert gang_use(NS, named, 4, {}).missing == ()


def test_thresholds_are_the_callers() -> None:
    use = gang_use(NS, ranks(2), 2, by_pod(samples({0: [0.9], 1: [0.6]})),
                   Thresholds(straggler=0.5))
    assert [r.flag for r in use.ranks] == ["", ""]


@given(st.lists(st.lists(st.floats(0, 1), min_size=1, max_size=4), min_size=1, max_size=8))
def test_idle_never_exceeds_allocated(utils: list[list[float]]) -> None:
    """Whatever the series, no rank is idle beyond its GPUs and the gang's idle GPUs are
    at most those allocated; a rank flagged idle has every GPU idle."""
    rs = [RankInput(str(i), f"train-{i}", len(u)) for i, u in enumerate(utils)]
    use = gang_use(NS, rs, len(rs), by_pod(samples(dict(enumerate(utils)))))
    assert 0 <= use.idle_gpus <= use.allocated
    for r in use.ranks:
        assert r.idle_gpus <= r.gpus
        assert r.flag != "idle" or r.idle_gpus == r.gpus
