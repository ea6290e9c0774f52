"""The reliability suite: faults injected into a running scheduler pair, the invariants
checked after each (``tests/e2e/reliability.py`` says which and how).

The short version runs in CI with the other e2e tests: one fault of each kind and a few
SIGKILLs. The full version (100 SIGKILLs mid-bind, 10 of each other fault) is behind the
``reliability`` marker, excluded from the default run; one command runs it and prints the
figures (README, "Operating it")::

    .venv/bin/pytest -m reliability -s tests/e2e/test_reliability.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e import reliability
from tests.e2e.conftest import SKIP_REASON, e2e_disabled

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(e2e_disabled(), reason=SKIP_REASON)]


def assert_reliable(figures: reliability.Figures, faults: int) -> None:
    assert figures.violations == [], figures.report()
    assert sum(figures.faults.values()) == faults
    assert len(figures.recoveries) == faults, figures.report()
    assert figures.stale == 0, figures.report()


def test_every_fault_once_leaves_no_gang_partly_bound_and_loses_nothing(
        tmp_path: Path) -> None:
    faults = ["kill", "apiserver", "kill", "etcd", "cut", "pause", "kill"]
    figures = reliability.run(tmp_path, faults)
    assert_reliable(figures, len(faults))
    assert figures.faults["pause"] == 1


@pytest.mark.reliability
@pytest.mark.timeout(4 * 3600)  # 140 rounds: 20-45 minutes on a loaded 2-core machine
def test_the_full_run(tmp_path: Path) -> None:
    kills = int(os.environ.get("GANG_SCHEDULER_RELIABILITY_KILLS", "100"))
    others = int(os.environ.get("GANG_SCHEDULER_RELIABILITY_OTHERS", "10"))
    faults = reliability.schedule(kills, others)
    figures = reliability.run(tmp_path, faults)
    assert_reliable(figures, len(faults))
