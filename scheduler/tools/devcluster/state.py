"""The dev cluster's state file, so that `up` in one shell and `down` / `env` in another agree.

Why a file: the processes outlive the command that started them. The state directory keeps
everything of one cluster (etcd data, certificates, logs, kubeconfigs) plus ``state.json`` that
records the processes and endpoints. Its default is per user and can be overridden with
``--state-dir`` or ``GANG_SCHEDULER_DEV_CLUSTER_DIR``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.tools.devcluster.procs import ManagedProcess

STATE_DIR_ENV = "GANG_SCHEDULER_DEV_CLUSTER_DIR"
STATE_FILE = "state.json"


def default_state_dir() -> Path:
    if os.environ.get(STATE_DIR_ENV):
        return Path(os.environ[STATE_DIR_ENV])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gang-scheduler" / "dev-cluster"


@dataclass(slots=True)
class ClusterState:
    """Endpoints and processes of one running dev cluster."""

    state_dir: str
    server: str
    etcd: str
    kubeconfig: str
    versions: dict[str, str]
    cluster_spec: str | None = None
    node_liveness: str = "standard"  # liveness.NodeLiveness.name
    processes: list[ManagedProcess] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "state_dir": self.state_dir, "server": self.server, "etcd": self.etcd,
            "kubeconfig": self.kubeconfig, "versions": self.versions,
            "cluster_spec": self.cluster_spec, "node_liveness": self.node_liveness,
            "processes": [p.to_json() for p in self.processes],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterState:
        return cls(
            state_dir=str(data["state_dir"]), server=str(data["server"]),
            etcd=str(data["etcd"]), kubeconfig=str(data["kubeconfig"]),
            versions={str(k): str(v) for k, v in data.get("versions", {}).items()},
            cluster_spec=data.get("cluster_spec"),
            node_liveness=str(data.get("node_liveness", "standard")),
            processes=[ManagedProcess.from_json(p) for p in data.get("processes", [])],
        )


def save(state: ClusterState) -> Path:
    path = Path(state.state_dir) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic, so a concurrent `env` never reads half a file
    return path


def load(state_dir: Path) -> ClusterState | None:
    path = state_dir / STATE_FILE
    try:
        return ClusterState.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None


def remove(state_dir: Path) -> None:
    (state_dir / STATE_FILE).unlink(missing_ok=True)
