"""Node liveness profiles: the standard one is what the dev cluster always ran, the scale one
turns Leases off and waits long enough, and a profile that would mark live nodes Unknown is
refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.tools.devcluster import controllers, kwok, liveness


def _documents(path: Path) -> list[Any]:
    return list(yaml.safe_load_all(path.read_text(encoding="utf-8")))


def test_the_standard_profile_keeps_the_flags_the_tests_ran_with() -> None:
    standard = liveness.STANDARD
    assert standard.kwok_flags() == ["--node-lease-duration-seconds=40"]
    assert standard.controller_manager_flags() == ["--kube-api-qps=100",
                                                   "--kube-api-burst=200"]
    assert (controllers.API_QPS, controllers.API_BURST) == (100, 200)


def test_the_standard_profile_runs_the_shipped_stages(tmp_path: Path) -> None:
    assert kwok.stages_file(tmp_path, liveness.STANDARD) == kwok.STAGES
    assert not list(tmp_path.iterdir())


def test_the_scale_profile_has_no_leases_and_a_grace_beyond_its_heartbeats() -> None:
    scale = liveness.SCALE
    assert scale.kwok_flags() == ["--node-lease-duration-seconds=0"]
    flags = scale.controller_manager_flags()
    assert "--node-monitor-grace-period=7200s" in flags
    assert scale.monitor_grace_s is not None and scale.monitor_grace_s > scale.heartbeat_max_s


def test_the_scale_stages_change_only_the_heartbeat_delay(tmp_path: Path) -> None:
    path = kwok.stages_file(tmp_path, liveness.SCALE)
    assert path.parent == tmp_path
    shipped, scaled = _documents(kwok.STAGES), _documents(path)
    assert len(shipped) == len(scaled)
    changed = [a["metadata"]["name"] for a, b in zip(shipped, scaled, strict=True) if a != b]
    assert changed == [kwok.HEARTBEAT_STAGE]
    heartbeat = next(d for d in scaled if d["metadata"]["name"] == kwok.HEARTBEAT_STAGE)
    assert heartbeat["spec"]["delay"] == {
        "durationMilliseconds": 1_800_000, "jitterDurationMilliseconds": 3_600_000}


@pytest.mark.parametrize(("changes", "message"), [
    ({"lease_seconds": -1}, "lease_seconds must be >= 0"),
    ({"heartbeat_s": 600, "heartbeat_max_s": 300}, "heartbeat_s <= heartbeat_max_s"),
    ({"lease_seconds": 0, "monitor_grace_s": 300}, "must exceed the longest gap"),
    ({"lease_seconds": 0, "monitor_grace_s": None}, "without Leases set monitor_grace_s"),
])
def test_a_profile_that_would_lose_live_nodes_is_refused(changes: dict[str, object],
                                                          message: str) -> None:
    fields: dict[str, Any] = {
        "name": "odd", "lease_seconds": 40, "heartbeat_s": 300, "heartbeat_max_s": 330,
        "monitor_grace_s": None, "controller_qps": 100, "controller_burst": 200}
    with pytest.raises(ValueError, match=message) as caught:
        liveness.NodeLiveness(**{**fields, **changes})
    assert "odd" in str(caught.value)


def test_an_unknown_profile_name_lists_the_known_ones() -> None:
    assert liveness.by_name("scale") is liveness.SCALE
    with pytest.raises(ValueError, match="'fast' is not one of scale, standard"):
        liveness.by_name("fast")
