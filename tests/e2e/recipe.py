"""A README block run line by line as a person pasting it would: what the recipe tests share.

Each line runs in bash with what the earlier lines set (``eval "$(... env)"`` exports are
taken into the environment), a line ending in ``&`` in the background (its output in a log
file), any other line to its end, which must succeed. The cluster the block starts gets a
state directory of its own (``GANG_SCHEDULER_DEV_CLUSTER_DIR``), so the session's and a
developer's are untouched, and is taken down after the test. Tests take a ``Shell`` from
the ``recipe_shell`` fixture (conftest).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.tools.devcluster import build
from scheduler.tools.devcluster.state import STATE_DIR_ENV
from tests.e2e.cluster_api import wait_for
from tests.e2e.test_deploy_support import stop_process

REPO = Path(__file__).resolve().parents[2]


def readme_block(heading: str) -> list[str]:
    """The commands of the first code block (indented four spaces) in the README's section
    *heading* (its whole line, e.g. ``### Under Kueue``), continuations joined, comments off."""
    section = (REPO / "README.md").read_text().split(f"\n{heading}\n", 1)[1]
    lines = section.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("    "))
    block = [ln[4:] for ln in lines[first:next(i for i in range(first, len(lines))
                                                if not lines[i].startswith("    "))]]
    joined = re.sub(r"\\\n\s*", "", "\n".join(block)).splitlines()
    return [re.sub(r"\s+#.*$", "", ln).strip() for ln in joined]


@dataclass
class Shell:
    """Where a block's lines run: their environment (the earlier lines' exports taken in),
    the test's directory for the background lines' logs, and those lines' processes, which
    must keep running while the test checks what the block made."""

    env: dict[str, str]
    tmp_path: Path
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run_block(self, heading: str, timeout: float = 900) -> None:
        """Run every line of the README's block under *heading* (``readme_block``)."""
        for line in readme_block(heading):
            self.run_line(line, timeout)

    def run_line(self, line: str, timeout: float) -> None:
        """Run one line of a block (see the module docstring); *timeout*: of a line run to
        its end."""
        if line.startswith('eval "$(') and line.endswith(')"'):
            out = subprocess.run(["bash", "-c", line[len('eval "$('):-2]], env=self.env,
                                 cwd=REPO, capture_output=True, text=True, timeout=60,
                                 check=True).stdout
            for name, value in re.findall(r"^export (\w+)=(.*)$", out, re.M):
                self.env[name] = shlex.split(value)[0]
        elif line.endswith("&"):
            log = (self.tmp_path / f"background-{len(self.background)}.log").open("wb")
            self.background.append(subprocess.Popen(
                ["bash", "-c", f"exec {line[:-1]}"], env=self.env, cwd=REPO, stdout=log,
                stderr=subprocess.STDOUT))
        else:
            done = subprocess.run(["bash", "-c", line], env=self.env, cwd=REPO,
                                  capture_output=True, text=True, timeout=timeout, check=False)
            assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])

    def kubectl_items(self, *args: str) -> list[dict[str, Any]]:
        """``kubectl get ... -o json``'s items, with the block's kubeconfig."""
        out = subprocess.run(["kubectl", "get", *args, "-o", "json"], env=self.env,
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return list(json.loads(out)["items"])

    def bound_pods(self, count: int, namespace: str, selector: str,
                   what: str) -> list[dict[str, Any]]:
        """The pods of label *selector* in *namespace*, once there are *count* and every one
        is bound (waits up to 180 s: what the block started binds them)."""
        def bound_whole() -> list[dict[str, Any]]:
            pods = self.kubectl_items("pods", "-n", namespace, "-l", selector)
            return pods if len(pods) == count and all(p["spec"].get("nodeName") for p in pods) \
                else []

        return wait_for(bound_whole, 180, what=what)


def shell(tmp_path: Path) -> Iterator[Shell]:
    """The body of the ``recipe_shell`` fixture (conftest): a Shell on no cluster yet; after
    the test, its background processes are stopped and whatever cluster the block left
    running is taken down."""
    kubectl_dir = str(build.kubectl_path().parent)
    env = {**os.environ, STATE_DIR_ENV: str(tmp_path / "cluster"),
           "PATH": os.pathsep.join([str(REPO / ".venv" / "bin"), kubectl_dir,
                                    os.environ.get("PATH", "")])}
    env.pop("KUBECONFIG", None)
    ran = Shell(env, tmp_path)
    try:
        yield ran
    finally:
        for proc in ran.background:
            stop_process(proc)
        subprocess.run(["bash", "-c", "gang-scheduler dev-cluster down"], env=env, cwd=REPO,
                       capture_output=True, timeout=180, check=False)
