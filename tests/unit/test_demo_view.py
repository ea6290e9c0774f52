"""The demo's view rendered to text: what a person watching it would read."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from scheduler.tools.demo import frame, view
from scheduler.tools.demo.scenario import JobSpec
from scheduler.tools.demo.track import PodObs, Tracker


def text_of(renderable: object, width: int = 200) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(renderable)
    return console.export_text()


QUEUES: list[dict[str, Any]] = [
    {"metadata": {"name": "team-b"}, "spec": {"parent": "research", "weight": 2, "quotas": [
        {"pool": "a100", "nominal": {"nvidia.com/gpu": 16}},
        {"pool": "h100", "nominal": {"nvidia.com/gpu": 16}}]},
     "status": {"pools": [{"pool": "a100", "allocated": {"nvidia.com/gpu": 20}}],
                "pendingGangs": 1, "admittedGangs": 1, "fairShare": 0.6667,
                "usageShare": 0.625}},
    {"metadata": {"name": "research"}, "spec": {}, "status": {}},
    {"metadata": {"name": "team-a"}, "spec": {"parent": "research", "quotas": [
        {"pool": "a100", "nominal": {"nvidia.com/gpu": 16}}]}, "status": {}},
]
NODES = [{"metadata": {"name": f"a100-000{i}", "labels": {
    "gangscheduler.io/pool": "a100", "topology.gangscheduler.io/rack": f"a100-b0-r{i // 2}"}},
    "status": {"allocatable": {"nvidia.com/gpu": "8"}}} for i in range(4)]


def sample() -> tuple[frame.Frame, Tracker]:
    jobs = [JobSpec("b-warmup", "team-b", "a100", 5, 4, 20, 20),
            JobSpec("b-ddp", "team-b", "a100", 8, 1, 12, 12, story="would deadlock")]
    t = Tracker(jobs, speed=1)
    t.submitted("b-warmup", 0)
    t.submitted("b-ddp", 1)
    pods = [PodObs(f"b-warmup-{i}", "b-warmup", 0, "team-b", f"a100-000{i // 2}", "Running", 4)
            for i in range(5)]
    pods += [PodObs(f"b-ddp-{i}", "b-ddp", 0, "team-b", "", "Pending", 1, False,
                    "Reserved (#1 in queue order): needs 8 nvidia.com/gpu, 4 available")
             for i in range(8)]
    t.update(pods, 2)
    return frame.build(2.0, t, QUEUES, NODES, pods, ["[   1.0s] submitted b-ddp"]), t


def test_queues_are_shown_as_a_tree_with_gpus_and_shares() -> None:
    f, _ = sample()
    assert [q.name for q in f.queues] == ["research", "team-a", "team-b"]
    team_b = f.queues[2]
    assert team_b.pools == (frame.PoolUse("a100", 20, 16), frame.PoolUse("h100", 0, 16))
    out = text_of(view.queues_table(f.queues))
    assert "20/16 ↑" in out  # borrowing is marked
    assert "0.67" in out and "0.62" in out


def test_gangs_show_state_bound_members_and_the_short_reason() -> None:
    f, _ = sample()
    out = text_of(view.gangs_table(f.gangs))
    assert "b-warmup" in out and "Running" in out and "5/5" in out
    assert "Waiting" in out and "0/8" in out
    assert "Reserved (#1 in queue order): needs 8 nvidia.com/gpu, 4 available" in out


def test_nodes_show_one_cell_per_gpu_by_rack() -> None:
    f, _ = sample()
    by_name = {n.name: n for n in f.nodes}
    assert by_name["a100-0000"].used == (("team-b", 8),)
    assert by_name["a100-0002"].used_gpus == 4 and by_name["a100-0003"].used_gpus == 0
    out = text_of(view.nodes_panel(f.nodes))
    assert "a100 b0-r0 (16/16)" in out and "a100 b0-r1 (4/16)" in out
    assert "a100-0002 ████···· 4/8" in out


def test_the_whole_view_and_the_plain_summary_line() -> None:
    f, _ = sample()
    out = text_of(view.render(f))
    for piece in ("gang-scheduler demo", "t+  2.0s", "jobs done 0/2", "Queues", "Gangs",
                  "Nodes", "submitted b-ddp"):
        assert piece in out
    assert view.summary_line(f) == ("a100 20/32 GPUs; running: b-warmup; waiting: b-ddp; "
                                   "done 0/2")


def test_the_summary_states_only_what_was_observed() -> None:
    jobs = [JobSpec("big", "team-b", "h100", 1, 8, 20, 20),
            JobSpec("short", "team-a", "h100", 1, 8, 5, 5),
            JobSpec("low", "team-a", "a100", 1, 8, 10, 10)]
    t = Tracker(jobs, speed=1)
    for name in ("big", "short", "low"):
        t.submitted(name, 0 if name != "short" else 1)

    def running(name: str, attempt: int = 0, phase: str = "Running") -> PodObs:
        return PodObs(f"{name}-0", name, attempt, "x", "n", phase, 8)

    t.update([running("short"), running("low")], 2)
    t.update([running("short", phase="Succeeded"), running("low", phase="Running")], 7)
    t.update([], 8)  # low's pods vanished: preempted
    t.submitted("low", 8)
    t.update([running("big"), running("low", 1)], 9)
    t.update([running("big", phase="Succeeded"), running("low", 1, "Succeeded")], 20)
    facts = view.summary_facts(t)
    assert facts[0] == "3 of 3 gangs ran to completion."
    assert any(f.startswith("short started after big was submitted but before it started")
               for f in facts)
    assert any(f.startswith("low was preempted 1× as a whole gang") for f in facts)
    out = text_of(view.summary(t, 20))
    assert "Summary after 20s" in out and "1×" in out
