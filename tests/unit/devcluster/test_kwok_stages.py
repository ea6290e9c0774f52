"""The fake kubelet's pod lifecycle (``kwok-stages.yaml``) stands up when an apiserver dies
mid-write: kwok v0.8.0 drops a stage whose write fails with anything but connection refused,
429, 503 or a timeout, so every stage must land in one request or be one kwok replays when it
re-lists. A pod Running without its start stamp would match no stage and run forever (the
reliability rig's "Jobs never completed", CI at da3f7e3)."""

from __future__ import annotations

from typing import Any

import yaml

from scheduler.tools.devcluster import kwok

STAMP = kwok.SIMULATED_STARTED_AT


def stages() -> dict[str, dict[str, Any]]:
    documents = yaml.safe_load_all(kwok.STAGES.read_text(encoding="utf-8"))
    return {d["metadata"]["name"]: d["spec"] for d in documents}


def test_a_pod_starts_in_one_write_that_carries_its_phase_and_its_start_stamp() -> None:
    patches = stages()["pod-start"]["next"]["patches"]
    assert len(patches) == 1, "two writes can leave a pod half started when the first lands"
    (patch,) = patches
    assert patch["subresource"] == "status"
    assert "root" not in patch, "the patch must contain both metadata and status"
    document = patch["template"]
    assert "\nmetadata:\n  annotations:\n    " + STAMP in "\n" + document
    assert "\nstatus:\n  phase: Running\n" in "\n" + document.split("\n", 1)[1]


def test_every_stage_writes_at_most_once() -> None:
    for name, spec in stages().items():
        assert len(spec["next"].get("patches") or ()) <= 1, name


def test_the_stamp_is_what_finishes_a_running_pod() -> None:
    """Why the stamp must not be lost: the stage that ends a pod's run selects on it."""
    keys = [e["key"] for e in stages()["pod-exit"]["selector"]["matchExpressions"]]
    assert f'.metadata.annotations["{STAMP}"]' in keys
