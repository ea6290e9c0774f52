"""The shipped examples survive a preemption: every Job they make ignores pod disruptions
(``podFailurePolicy``: ``DisruptionTarget`` -> ``Ignore``), so a preempted Job is recreated
and resumes instead of failing for good (tests/e2e/test_resume.py shows the recipe live;
tests/e2e/test_examples_apply.py applies the files)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(ROOT / "examples").glob("*.yaml"),
                  *(p for p in (ROOT / "deploy").rglob("*.yaml") if "templates" not in p.parts)])


def job_specs(obj: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every Job spec in *obj*: a Job's, and the Job templates of JobSets and runtimes."""
    if not isinstance(obj, dict):
        return
    if obj.get("kind") == "Job":
        yield where, obj["spec"]
    for rj in ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get(
            "replicatedJobs") or (obj.get("spec") or {}).get("replicatedJobs") or []:
        yield f"{where} replicatedJobs[{rj['name']}]", rj["template"]["spec"]


SPECS = [(f"{path.relative_to(ROOT)}: {where}", spec) for path in SOURCES
         for doc in yaml.safe_load_all(path.read_text()) if doc
         for where, spec in job_specs(doc, str(doc.get("metadata", {}).get("name")))]


def test_the_examples_ship_jobs() -> None:
    assert len(SPECS) >= 2, [name for name, _ in SPECS]  # the DDP Job and Trainer's runtime


@pytest.mark.parametrize(("where", "spec"), SPECS, ids=[name for name, _ in SPECS])
def test_a_shipped_job_is_recreated_after_a_preemption(where: str, spec: dict[str, Any]) -> None:
    rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
    # (``status`` is defaulted by the Job API but required by Trainer's CRD schema.)
    assert any(r["action"] == "Ignore" and {"type": "DisruptionTarget", "status": "True"} in
               r.get("onPodConditions", []) for r in rules), f"{where}: no DisruptionTarget rule"
    assert spec["template"]["spec"].get("restartPolicy") == "Never", where
    assert 0 < spec.get("backoffLimit", 6) <= 6, f"{where}: backoffLimit"
    assert spec["template"]["spec"].get("terminationGracePeriodSeconds", 30) >= 30, where
