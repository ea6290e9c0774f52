"""Helpers shared by ``test_deploy_*`` and ``test_examples_*`` (this module has no tests).

Why a cluster of their own instead of the session ``control_plane``: installing ``deploy/``
creates cluster-scoped objects with fixed names (Queues ``default``, ``team-a`` ...,
PriorityClasses, the ClusterRole) and runs a scheduler for the real ``schedulerName:
gang-scheduler``, which would take the pods other e2e tests create with that name and bind
by hand. A module-scoped dev cluster costs a few seconds and keeps everyone honest.

Why the real kubectl: ``kubectl apply -k`` (with its bundled kustomize) is what the README tells
an admin to run, so that is what is tested; the binary is built from the same pinned
``k8s.io/kubernetes`` module as the apiserver (``scheduler.tools.devcluster.build.KUBECTL``).
"""

from __future__ import annotations

import functools
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from scheduler.tools.devcluster import build, procs
from scheduler.tools.devcluster.cluster import DevCluster
from scheduler.world import clusterspec
from tests.e2e import capacity
from tests.e2e.cluster_api import ControlPlane, answers_ready, wait_for

REPO = build.REPO_ROOT
CLI = REPO / ".venv" / "bin" / "gang-scheduler"
SYSTEM_NS = "gang-scheduler-system"
SA_NAME = "gang-scheduler"
CRDS = ("podgroups.scheduling.x-k8s.io", "queues.gangscheduler.io")


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the pinned kubectl; with ``check`` a failure shows its stdout and stderr."""
    proc = subprocess.run([str(build.kubectl_path()), "--kubeconfig", str(kubeconfig), *args],
                          input=stdin, capture_output=True, text=True, timeout=120, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def kubectl_json(kubeconfig: Path, *args: str) -> Any:
    return json.loads(kubectl(kubeconfig, *args, "-o", "json").stdout)


@dataclass
class Deployed:
    """A dev cluster with ``deploy/`` and ``deploy/queues`` applied by kubectl, fake a100/h100
    nodes, and ``gang-scheduler run`` as the deploy/ ServiceAccount with the ConfigMap's config."""

    cluster: DevCluster
    workdir: Path
    applied: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    sa_kubeconfig: Path = Path()

    @property
    def cluster_operators(self) -> bool:
        """Whether JobSet and Kubeflow Trainer run (see conftest.with_operators)."""
        return bool(self.cluster.state and "trainer-controller" in self.cluster.state.versions)

    @property
    def cp(self) -> ControlPlane:
        return ControlPlane(self.cluster, operators=self.cluster_operators)

    @property
    def admin(self) -> Path:
        return self.cluster.kubeconfig

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return kubectl(self.admin, *args, **kwargs)

    def install(self) -> None:
        """What an admin runs on a fresh cluster (README "Installing on a cluster")."""
        self.applied["base"] = self.kubectl("apply", "-k", str(REPO / "deploy"))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                     *(f"crd/{c}" for c in CRDS))
        self.applied["queues"] = self.kubectl("apply", "-k", str(REPO / "deploy" / "queues"))

    def create_nodes(self) -> list[str]:
        """The dev cluster's pools: a100 and h100, 4 nodes x 8 GPUs each (the queues' pools)."""
        spec = clusterspec.load(REPO / "scheduler" / "examples" / "clusters" / "dev.yaml")
        return self.cp.create_nodes(spec)

    def config_from_configmap(self) -> str:
        cm = kubectl_json(self.admin, "-n", SYSTEM_NS, "get", "configmap",
                          "gang-scheduler-config")
        return str(cm["data"]["config.yaml"])

    def start_scheduler(self, timeout_s: float = 60.0) -> None:
        """``gang-scheduler run`` with a token of the deploy/ ServiceAccount (never created
        here: it must come from deploy/) and the ConfigMap's config, leader election on."""
        self.sa_kubeconfig = self.cluster.service_account_kubeconfig(
            SYSTEM_NS, SA_NAME, create=False, path=self.workdir / "sa.kubeconfig")
        config = self.workdir / "config.yaml"
        config.write_text(self.config_from_configmap())
        self.port = procs.free_port()
        with (self.workdir / "scheduler.log").open("wb") as log:
            self.proc = subprocess.Popen(
                [str(CLI), "run", "--kubeconfig", str(self.sa_kubeconfig), "--config",
                 str(config), "--metrics-address", f"127.0.0.1:{self.port}",
                 "--identity", "e2e-deploy"],
                stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        wait_for(self._ready, timeout_s, 0.2, what=f"scheduler ready (log: {self.log_path})")

    @property
    def log_path(self) -> Path:
        return self.workdir / "scheduler.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"scheduler exited {self.proc.returncode}:\n{self.log()[-3000:]}")
        return answers_ready(self.port)

    def stop_scheduler(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def delete_workloads(self, *namespaces: str) -> None:
        """Clean up between tests: TrainJobs, JobSets and Jobs go first, leaving what they
        made (so no controller recreates any), then PodGroups and every pod at once (grace 0:
        a test's cleanup need not wait out the examples' 30 s grace periods). Namespaces
        stay: the next test applies the same examples into them."""
        owners = "trainjobs,jobsets,jobs" if self.cluster_operators else "jobs"
        for ns in namespaces:
            self.kubectl("-n", ns, "delete", owners, "--all", "--cascade=orphan",
                         "--wait=true", "--ignore-not-found")
            self.kubectl("-n", ns, "delete", "pods,podgroups.scheduling.x-k8s.io,"
                         "podgroups.scheduling.k8s.io,workloads", "--all", "--grace-period=0",
                         "--force", "--wait=true", "--ignore-not-found")


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 20 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


D = TypeVar("D", bound="Deployed")


def installed(tmp_path_factory: pytest.TempPathFactory, kind: type[D], name: str) -> Iterator[D]:
    """The body of a module fixture: a dev cluster of its own without pre-installed CRDs,
    ``kind.install()``, the training operators (after it: Trainer needs the PodGroup CRD the
    install brings), the dev pools and the scheduler, watched for over-commits; torn down
    after."""
    from tests.e2e.conftest import SKIP_REASON, e2e_disabled, with_operators

    if e2e_disabled():
        pytest.skip(SKIP_REASON)
    say = functools.partial(print, "[dev-cluster]")
    build.ensure_all(log=say, operators=with_operators())
    workdir = tmp_path_factory.mktemp(name)
    env = kind(DevCluster(workdir / "cluster", owned=True), workdir)
    try:
        started = time.monotonic()
        # Without the CRDs `dev-cluster up` would pre-install: the install brings them.
        env.cluster.up(log=say, install_crds=False, training_operators=False)
        env.install()
        if with_operators():
            env.cluster.start_training_operators(log=say)
        env.create_nodes()
        env.start_scheduler()
        print(f"[{name}] installed and scheduling in {time.monotonic() - started:.1f}s")
        with capacity.watching(env.cluster.kubeconfig, f"the {name} cluster"):
            yield env
    finally:
        env.stop_scheduler()
        env.cluster.down(log=lambda line: print(f"[dev-cluster] {line}"))


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    """One installed cluster per test module, with the scheduler running; torn down after."""
    yield from installed(tmp_path_factory, Deployed, "deployed")
