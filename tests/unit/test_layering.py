"""The pure core never touches the Kubernetes API client.

import-linter (``lint-imports``, run in CI) checks the package layering; this test checks the
one rule it cannot express: modules outside ``scheduler.kube``, ``scheduler.tools.devcluster`` and
``scheduler.cli`` may import nothing from ``kubernetes`` except ``kubernetes.utils.quantity``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EDGE = ("scheduler/kube/", "scheduler/tools/devcluster/", "scheduler/cli/")
ALLOWED = {"kubernetes.utils.quantity"}


def _pure_modules() -> list[Path]:
    files = []
    for pkg in ("scheduler", "policies", "simulator"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(EDGE):
                files.append(path)
    return files


def _kubernetes_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "kubernetes"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "kubernetes":
            found.append(node.module or "")
    return found


@pytest.mark.parametrize("path", _pure_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_pure_module_does_not_import_the_api_client(path: Path) -> None:
    bad = [m for m in _kubernetes_imports(path) if m not in ALLOWED]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}; only {sorted(ALLOWED)} is allowed"
