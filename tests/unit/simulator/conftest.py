"""Where the real traces live for tests: ``../shared/traces`` from the repository root."""

from __future__ import annotations

from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parents[3].parent / "shared" / "traces"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    if not (TRACES / "philly" / "philly.csv").is_file():
        pytest.skip(f"real traces not present at {TRACES}")
    return TRACES
