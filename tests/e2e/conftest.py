"""The `control_plane` fixture: one dev cluster (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok) per session, and the over-commit invariant checked around every test.

Why session-scoped: starting a control plane takes seconds and tests isolate themselves with a
fresh namespace each (`control_plane.new_namespace()`). The binaries are built on first use and
reused from ~/.cache/gang-scheduler/bin afterwards. Teardown always runs: the fixture's
finalizer, and, if the test process dies, atexit / signal handlers and PR_SET_PDEATHSIG.

Every dev cluster a fixture starts is watched (`capacity.watching`); `no_overcommit` fails a
test during which any node had more allocated than its allocatable.

Set ``GANG_SCHEDULER_E2E=0`` to skip every e2e test (CI runs them).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.tools.devcluster import build
from scheduler.tools.devcluster.cluster import DevCluster
from tests.e2e import capacity, recipe
from tests.e2e.cluster_api import ControlPlane
from tests.e2e.live import InProcessScheduler, Tenant, tenant_config

E2E_ENV = "GANG_SCHEDULER_E2E"
SKIP_REASON = f"{E2E_ENV}=0: end-to-end tests against a real kube-apiserver are disabled"
# GANG_SCHEDULER_E2E_OPERATORS=0 starts the session cluster without JobSet and Kubeflow
# Trainer (quicker; their tests skip).
OPERATORS_ENV = "GANG_SCHEDULER_E2E_OPERATORS"


def with_operators() -> bool:
    return os.environ.get(OPERATORS_ENV, "").strip() != "0"


def e2e_disabled() -> bool:
    return os.environ.get(E2E_ENV, "").strip() == "0"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not e2e_disabled():
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if item.get_closest_marker("e2e"):
            item.add_marker(skip)


def fresh_control_plane(tmp_path_factory: pytest.TempPathFactory, name: str,
                        operators: bool) -> Iterator[ControlPlane]:
    """A fresh, running dev cluster with no nodes, watched for over-commit; down afterwards."""
    if e2e_disabled():
        pytest.skip(SKIP_REASON)
    build.ensure_all(log=lambda line: print(f"[dev-cluster] {line}"), operators=operators)
    cluster = DevCluster(tmp_path_factory.mktemp("dev-cluster"), owned=True)
    try:
        cluster.up(log=lambda line: print(f"[dev-cluster] {line}"),
                   training_operators=operators)
        with capacity.watching(cluster.kubeconfig, name) as watch:
            yield ControlPlane(cluster, watch, operators)
    finally:
        cluster.down(log=lambda line: print(f"[dev-cluster] {line}"))


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A fresh, running dev cluster with no nodes; torn down at the end of the session."""
    yield from fresh_control_plane(tmp_path_factory, "the session cluster", with_operators())


@pytest.fixture(autouse=True)
def no_overcommit() -> Iterator[None]:
    """Fail the test if, while it ran, a node of any watched cluster had more allocated than its
    allocatable (kwok admits anything: this is the kubelet's check, as an invariant)."""
    marks = [(watch, len(watch.violations)) for watch in capacity.ACTIVE]
    yield
    found = [f"{watch.name}: {v}" for watch, mark in marks for v in watch.unexpected(mark)]
    if found:
        pytest.fail("over-commit: " + "; ".join(found[:5]), pytrace=False)


@pytest.fixture
def namespace(control_plane: ControlPlane) -> str:
    """A fresh namespace for one test (never deleted: see ControlPlane.new_namespace)."""
    return control_plane.new_namespace()


@pytest.fixture
def recipe_shell(tmp_path: Path) -> Iterator[recipe.Shell]:
    """A shell to run a README block in, on a dev cluster of its own (tests/e2e/recipe.py)."""
    yield from recipe.shell(tmp_path)


# The live scheduler (tests/e2e/live.py) -------------------------------------------------------
@pytest.fixture
def tenant(control_plane: ControlPlane) -> Tenant:
    """A fresh namespace, node pool, Queue and schedulerName for one live-scheduler test."""
    return Tenant.create(control_plane)


@pytest.fixture
def start_scheduler(control_plane: ControlPlane,
                    tenant: Tenant) -> Iterator[Callable[..., InProcessScheduler]]:
    """Start an in-process scheduler serving only `tenant` (config overrides as keywords);
    every one started is stopped at teardown."""
    started: list[InProcessScheduler] = []

    def start(**overrides: Any) -> InProcessScheduler:
        runner = InProcessScheduler.start(control_plane, tenant_config(tenant, **overrides))
        started.append(runner)
        return runner

    yield start
    for runner in started:
        runner.stop()


@pytest.fixture
def live_scheduler(start_scheduler: Callable[..., InProcessScheduler]) -> InProcessScheduler:
    """An in-process scheduler serving only `tenant`, with the test defaults."""
    return start_scheduler()
