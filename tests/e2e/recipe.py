"""A README block run line by line as a person pasting it would: what the recipe tests share.

Each line runs in bash with what the earlier lines set (``eval "$(... env)"`` exports are
taken into the environment), a line ending in ``&`` in the background (its output in a log
file), any other line to its end, which must succeed. The cluster the block starts gets a
state directory of its own (``GANG_SCHEDULER_DEV_CLUSTER_DIR``), so the session's and a
developer's are untouched, and is taken down after the test.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

from scheduler.tools.devcluster import build
from scheduler.tools.devcluster.state import STATE_DIR_ENV

REPO = Path(__file__).resolve().parents[2]


def readme_block(heading: str) -> list[str]:
    """The commands of the first code block (indented four spaces) under *heading* in the
    README, ``\\`` continuations joined, comments off."""
    section = (REPO / "README.md").read_text().split(f"\n{heading}\n", 1)[1]
    lines = section.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("    "))
    block = [ln[4:] for ln in lines[first:next(i for i in range(first, len(lines))
                                                if not lines[i].startswith("    "))]]
    joined = re.sub(r"\\\n\s*", "", "\n".join(block)).splitlines()
    return [re.sub(r"\s+#.*$", "", ln).strip() for ln in joined]


def shell(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment the block's lines run in (a fixture's body); whatever cluster it left
    running is taken down after."""
    kubectl_dir = str(build.kubectl_path().parent)
    env = {**os.environ, STATE_DIR_ENV: str(tmp_path / "cluster"),
           "PATH": os.pathsep.join([str(REPO / ".venv" / "bin"), kubectl_dir,
                                    os.environ.get("PATH", "")])}
    env.pop("KUBECONFIG", None)
    yield env
    subprocess.run(["bash", "-c", "gang-scheduler dev-cluster down"], env=env, cwd=REPO,
                   capture_output=True, timeout=180, check=False)


def run_line(line: str, env: dict[str, str], tmp_path: Path,
             background: list[subprocess.Popen[bytes]], timeout: float) -> None:
    """Run one line of the block (see the module docstring); *background* collects the
    processes of ``&`` lines, for the test to stop; *timeout*: of a line run to its end."""
    if line.startswith('eval "$(') and line.endswith(')"'):
        out = subprocess.run(["bash", "-c", line[len('eval "$('):-2]], env=env, cwd=REPO,
                             capture_output=True, text=True, timeout=60, check=True).stdout
        for name, value in re.findall(r"^export (\w+)=(.*)$", out, re.M):
            env[name] = shlex.split(value)[0]
    elif line.endswith("&"):
        log = (tmp_path / f"background-{len(background)}.log").open("wb")
        background.append(subprocess.Popen(["bash", "-c", f"exec {line[:-1]}"], env=env,
                                           cwd=REPO, stdout=log, stderr=subprocess.STDOUT))
    else:
        done = subprocess.run(["bash", "-c", line], env=env, cwd=REPO, capture_output=True,
                              text=True, timeout=timeout, check=False)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
