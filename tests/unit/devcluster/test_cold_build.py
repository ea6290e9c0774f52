"""A build on an empty Go module cache still caches the component's manifests.

Found by a cold build of everything with fresh ``GOMODCACHE``/``GOCACHE``: before the build,
``go list -m -json`` knows the pinned version but gives no ``Dir`` (nothing is downloaded
yet), so copying JobSet's CRDs failed with "... is not in " after its binary was built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.tools.devcluster import build


def test_manifests_come_from_the_module_directory_the_build_downloaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    module = tmp_path / "gomodcache" / "sigs.k8s.io" / "jobset@v0.10.1"
    listed: list[dict[str, str]] = [{"Time": "2026-01-01T00:00:00Z"}]  # cold: no Dir yet

    def module_info(component: build.Component, env: dict[str, str],
                    cwd: Path | None = None) -> dict[str, str]:
        return listed[-1]

    def go_build(cmd: list[str], *args: Any) -> None:  # downloads the module, writes the binary
        for relative in build.JOBSET.manifests:
            (module / relative).parent.mkdir(parents=True, exist_ok=True)
            (module / relative).write_text("kind: CustomResourceDefinition\n")
        Path(cmd[cmd.index("-o") + 1]).write_bytes(b"\x7fELF")
        listed.append({"Time": "2026-01-01T00:00:00Z", "Dir": str(module)})

    monkeypatch.setattr(build, "module_info", module_info)
    monkeypatch.setattr(build, "_run_with_progress", go_build)
    monkeypatch.setattr(build.shutil, "which", lambda name: "/usr/bin/go")
    binary = build.ensure(build.JOBSET, log=lambda line: None)
    assert binary.is_file()
    for relative in build.JOBSET.manifests:
        assert build.JOBSET.manifest(relative).read_text().startswith("kind:")
