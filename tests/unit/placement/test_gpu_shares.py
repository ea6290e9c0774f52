"""GPU shares (issue 36): a fraction goes on one GPU index and never over it, whole GPUs only
on wholly free ones, and each policy chooses as it says; properties over random workloads."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.placement.gpu_shares import (
    MILLI,
    Fragmentation,
    Mix,
    Nodes,
    NodeState,
    Policy,
    ShareRequest,
)

HALF = ShareRequest(1000, 1024, 1, 500)
WHOLE = ShareRequest(1000, 1024, 1)
TWO = ShareRequest(1000, 1024, 2)


def state(*gpus: int, cpu: int = 32_000, memory: int = 65_536, model: str = "V100") -> NodeState:
    return NodeState(cpu, memory, tuple(gpus), model)


@pytest.mark.parametrize(("cpu", "gpus", "milli", "message"), [
    (1, 2, 500, "is of one GPU"),
    (1, 1, 0, "milli must be in"),
    (1, 1, 1500, "milli must be in"),
    (-1, 0, 1000, "negative request"),
])
def test_a_malformed_request_is_refused_naming_why(cpu: int, gpus: int, milli: int,
                                                   message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ShareRequest(cpu, 1, gpus, milli)


@pytest.mark.parametrize(("node", "request_", "expected"), [
    # a fraction: one option per distinct free share that holds it
    (state(1000, 600, 600, 200), HALF, [((0,), (500, 600, 600, 200)),
                                         ((1,), (1000, 100, 600, 200))]),
    # whole GPUs: only wholly free ones
    (state(1000, 999, 1000), TWO, [((0, 2), (0, 999, 0))]),
    (state(1000, 999), TWO, []),
    # CPU, memory, model
    (state(1000, cpu=500), WHOLE, []),
    (state(1000, memory=10), WHOLE, []),
    (state(1000, model="T4"), ShareRequest(1, 1, 1, models=frozenset({"V100"})), []),
    # no GPU asked: fits wherever CPU and memory do, GPU-less nodes too
    (state(), ShareRequest(1000, 1), [((), ())]),
])
def test_the_ways_a_request_fits_a_node(node: NodeState, request_: ShareRequest,
                                        expected: list[tuple[tuple[int, ...], tuple[int, ...]]]
                                        ) -> None:
    got = [(gpus, after.gpus) for gpus, after in node.options(request_)]
    assert got == expected


def test_best_fit_takes_the_tightest_gpu_of_the_fullest_node() -> None:
    nodes = Nodes({"a": state(1000, 1000), "b": state(1000, 600), "c": state(1000, 520)})
    choice = nodes.choose(HALF, Policy.BEST_FIT)
    assert choice is not None and choice.node == "c"
    assert nodes.apply(choice) == (1,)
    assert nodes.states["c"].gpus == (1000, 20)


def test_fragmentation_leaves_whole_gpus_usable_where_best_fit_strands_them() -> None:
    """A half-GPU pod; the mix is mostly whole-GPU pods. Best fit takes node a (the fewest
    shares left), whose CPU is then too little for any whole-GPU pod: its remaining 1.5 GPUs
    are stranded. Fragmentation sees that and takes b, where only half a GPU is lost."""
    nodes = {"a": state(1000, 1000, cpu=1500), "b": state(1000, 1000, 1000)}
    frag = Fragmentation(Mix.observed([WHOLE] * 9 + [HALF]))
    best_fit = Nodes(nodes).choose(HALF, Policy.BEST_FIT)
    least_fragmented = Nodes(nodes).choose(HALF, Policy.FRAGMENTATION, frag)
    assert best_fit is not None and best_fit.node == "a"
    assert least_fragmented is not None and least_fragmented.node == "b"


def test_fragmentation_keeps_cpu_for_the_free_gpus_of_a_node() -> None:
    """A CPU-hungry half-GPU pod; the mix is mostly whole-GPU pods with a CPU core per GPU.
    On a (three free GPUs, 9 cores) it leaves one core for 2.5 free GPUs; on b (four free
    GPUs, 64 cores) CPU is plenty. Counted kind by kind both add the same half GPU (a whole
    GPU still fits on a), and the tie-breaks would take a (fewer shares left); the starved
    shares (GPUs the CPU left cannot feed) send it to b."""
    hungry = ShareRequest(8000, 1024, 1, 500)
    nodes = Nodes({"a": state(1000, 1000, 1000, cpu=9000),
                   "b": state(1000, 1000, 1000, 1000, cpu=64_000)})
    frag = Fragmentation(Mix.observed([WHOLE] * 9 + [HALF]))
    after_a = NodeState(1000, 64_512, (1000, 1000, 500), "V100")
    assert frag.of(after_a) - frag.of(nodes.states["a"]) == pytest.approx(
        frag.of(NodeState(56_000, 64_512, (1000, 1000, 1000, 500), "V100"))
        - frag.of(nodes.states["b"]))
    assert frag.starved(after_a) > 0
    choice = nodes.choose(hungry, Policy.FRAGMENTATION, frag)
    assert choice is not None and choice.node == "b"


@pytest.mark.parametrize(("node", "kinds", "expected"), [
    # one core per GPU asked (1 millicore a share): 1,500 free shares, 500 millicores
    (state(1000, 500, cpu=500), [WHOLE], 1000),
    (state(1000, 500, cpu=1500), [WHOLE], 0),
    # the CPU per share is weighed by GPU demand: a half at 1 core is 2 millicores a share
    (state(1000, 1000, cpu=1000), [WHOLE, HALF, HALF], 1000 * 2 - 1000 / 1.5),
    # a mix asking no CPU starves nothing
    (state(1000, 1000, cpu=0), [ShareRequest(0, 1024, 1)], 0),
])
def test_starved_shares_are_those_the_free_cpu_cannot_feed(
        node: NodeState, kinds: list[ShareRequest], expected: float) -> None:
    assert Fragmentation(Mix.observed(kinds)).starved(node) == pytest.approx(expected)


def test_fragmentation_reads_the_mix_it_is_given() -> None:
    """The same cluster, a mix of only quarter-GPU pods: filling b to 0 or a to 500 leaves
    nothing a quarter cannot use; ties go to the tighter GPU (b)."""
    quarter = ShareRequest(1000, 1024, 1, 250)
    nodes = Nodes({"a": state(1000, 0), "b": state(500, 0)})
    choice = nodes.choose(HALF, Policy.FRAGMENTATION, Fragmentation(Mix.observed([quarter])))
    assert choice is not None and choice.node == "b"


@pytest.mark.parametrize(("node", "kinds", "expected"), [
    # a share at least the kind's per-GPU demand is usable; a smaller one is not
    (state(1000, 1000), [HALF], 0),
    (state(1000, 600, 300), [HALF], 300),
    # a whole-GPU kind uses wholly free GPUs only: a partly taken one is fragment
    (state(1000, 600), [WHOLE], 600),
    # the kind does not fit the node at all: every free share is fragment to it
    (state(1000, 600), [TWO], 1600),
    (state(1000, 600, cpu=500), [HALF], 1600),
    (state(1000, 600, memory=10), [HALF], 1600),
    (state(1000, 600, model="T4"), [ShareRequest(1000, 1024, 1, 500, frozenset({"V100"}))],
     1600),
    # kinds weigh by their share of the GPU demand: one whole and two halves weigh alike
    (state(1000, 600), [WHOLE, HALF, HALF], 300),
    # pods asking no GPU weigh nothing
    (state(1000, 600, cpu=500), [ShareRequest(1000, 1)], 0),
])
def test_fragmentation_of_a_node_under_a_mix(node: NodeState, kinds: list[ShareRequest],
                                             expected: float) -> None:
    """The per-kind measure (what a kind cannot use of the node's free shares) and its
    weighting; CPU- or memory-exhausted nodes count all their free GPU shares."""
    assert Fragmentation(Mix.observed(kinds)).of(node) == pytest.approx(expected)


def test_random_is_a_seeded_draw_over_feasible_nodes() -> None:
    names = {f"n{i}": state(1000) for i in range(20)} | {"full": state(0)}

    def draws(seed: int) -> list[str]:
        nodes, rng, out = Nodes(names), random.Random(seed), []
        for _ in range(10):
            choice = nodes.choose(HALF, Policy.RANDOM, rng=rng)
            assert choice is not None
            out.append(choice.node)
        return out

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)
    assert "full" not in draws(1) + draws(2)


def test_nothing_fits_nowhere() -> None:
    nodes = Nodes({"a": state(400), "b": state()})
    for policy in Policy:
        frag = Fragmentation(Mix.observed([HALF]))
        assert nodes.choose(HALF, policy, frag, random.Random(0)) is None


REQUESTS = st.one_of(
    st.builds(ShareRequest, st.integers(0, 16_000), st.integers(0, 65_536),
              st.just(1), st.integers(1, MILLI)),
    st.builds(ShareRequest, st.integers(0, 16_000), st.integers(0, 65_536),
              st.integers(0, 8)))


@settings(max_examples=60, deadline=None)
@given(gpus=st.lists(st.integers(0, 8), min_size=1, max_size=6),
       requests=st.lists(REQUESTS, min_size=1, max_size=40),
       policy=st.sampled_from(list(Policy)))
def test_never_over_a_gpu_cpu_or_memory_and_a_pod_placed_only_where_it_fits(
        gpus: list[int], requests: list[ShareRequest], policy: Policy) -> None:
    nodes = Nodes({f"n{i}": state(*([MILLI] * g)) for i, g in enumerate(gpus)})
    frag, rng = Fragmentation(Mix.observed(requests)), random.Random(0)
    capacity = sum(gpus) * MILLI
    placed_shares = 0
    for r in requests:
        before = dict(nodes.states)
        choice = nodes.choose(r, policy, frag, rng)
        if choice is None:
            assert all(next(s.options(r), None) is None for s in before.values())
            continue
        taken = nodes.apply(choice)
        old, new = before[choice.node], nodes.states[choice.node]
        assert new.cpu == old.cpu - r.cpu >= 0 and new.memory == old.memory - r.memory >= 0
        assert all(0 <= g <= MILLI for g in new.gpus)
        if r.fraction:
            (i,) = taken
            assert old.gpus[i] - new.gpus[i] == r.milli
        elif r.gpus:
            assert len(taken) == r.gpus and all(old.gpus[i] == MILLI for i in taken)
        assert sum(old.gpus) - sum(new.gpus) == r.shares if r.gpus else new.gpus == old.gpus
        placed_shares += r.shares if r.gpus else 0
    assert capacity - sum(sum(s.gpus) for s in nodes.states.values()) == placed_shares
