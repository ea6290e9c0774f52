"""``gang-scheduler demo`` end to end: a dev cluster with fake GPU pools, the demo's queues, the
live scheduler in a thread, the story, the summary, and cleanup whatever happens.

Why in-process: one command, one process to interrupt. The scheduler thread is the same
``LiveScheduler`` that ``gang-scheduler run`` starts (same informers, decide, binder), only its
log goes to a file so the view owns the terminal. Cleanup runs on every exit path (normal end,
timeout, error, Ctrl-C); the cluster is owned by this process unless ``--keep``, so even a
SIGKILL leaves no etcd or apiserver behind (PR_SET_PDEATHSIG, see scheduler/devcluster).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import structlog
import yaml
from rich.console import Console

from scheduler.kube.client import ApiError, KubeClient, connect
from scheduler.kube.runner import LiveScheduler
from scheduler.run.config import SchedulerConfig
from scheduler.tools.demo import scenario, view
from scheduler.tools.demo.driver import Driver
from scheduler.tools.devcluster import build, state
from scheduler.tools.devcluster.cluster import AlreadyRunning, DevCluster
from scheduler.world import clusterspec

PRIORITY_CLASSES = build.REPO_ROOT / "deploy" / "priorityclasses.yaml"


@dataclass(frozen=True, slots=True)
class Options:
    speed: float = 1.0
    live: bool = True
    keep: bool = False
    timeout_s: float = 600.0
    state_dir: Path | None = None
    cluster: Path = scenario.DEMO_DIR / "cluster.yaml"
    queues: Path = scenario.DEMO_DIR / "queues.yaml"
    jobs: Path = scenario.JOBS_FILE


def scheduler_config() -> SchedulerConfig:
    """The defaults, with the retries and event throttling of a one-minute demo."""
    base = SchedulerConfig(cycle_interval_seconds=0.5, bind_backoff_initial_seconds=1.0,
                           bind_backoff_max_seconds=5.0, event_min_interval_seconds=5.0,
                           eviction_grace_period_seconds=0)
    return dataclasses.replace(base, leader_election=dataclasses.replace(
        base.leader_election, enabled=False))


def _log_to_file(path: Path) -> IO[str]:
    """The scheduler's structlog (and stdlib) output as JSON lines in `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out = path.open("a", encoding="utf-8")
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.format_exc_info, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(file=out), cache_logger_on_first_use=False)
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    return out


def _post(client: KubeClient, path: str, body: dict[str, Any]) -> None:
    resp = client.request("POST", path, body=body)
    if not resp.ok and resp.status != 409:
        raise ApiError("POST", path, resp)


def set_up(client: KubeClient, opts: Options, teams: set[str]) -> None:
    """Namespaces (ready for pods), the deploy/ PriorityClasses and the demo's queues."""
    for team in sorted(teams):
        _post(client, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": team}})
    for doc in yaml.safe_load_all(PRIORITY_CLASSES.read_text()):
        if doc:
            _post(client, "/apis/scheduling.k8s.io/v1/priorityclasses", doc)
    for doc in yaml.safe_load_all(opts.queues.read_text()):
        if doc:
            _post(client, "/apis/gangscheduler.io/v1alpha1/queues", doc)
    deadline = time.monotonic() + 30
    for team in sorted(teams):  # the serviceaccount controller creates its `default` one
        path = f"/api/v1/namespaces/{team}/serviceaccounts/default"
        while not client.request("GET", path).ok:
            if time.monotonic() > deadline:
                raise TimeoutError(f"ServiceAccount {team}/default never appeared")
            time.sleep(0.1)


class SchedulerThread:
    """``LiveScheduler`` in a daemon thread; ``stop`` joins it."""

    def __init__(self, client: KubeClient) -> None:
        self.live = LiveScheduler(scheduler_config(), client, poll_interval=0.05,
                                  queue_status_interval=1.0, identity="demo")
        self.live.start(sync_timeout=60)
        self.thread = threading.Thread(target=self.live.run, name="gang-scheduler", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.live.stop()
        self.thread.join(timeout=15)


def run(opts: Options, console: Console) -> int:
    """The whole demo; returns the process exit code (0: every job ran to completion)."""
    jobs = scenario.load(opts.jobs)
    spec = clusterspec.load(opts.cluster)
    own_dir = opts.state_dir is None and not opts.keep
    state_dir = opts.state_dir or (state.default_state_dir() if opts.keep else
                                   Path(tempfile.mkdtemp(prefix="gang-scheduler-demo-")))
    cluster = DevCluster(state_dir, owned=not opts.keep)
    say = (lambda line: console.print(f"[dim]{line}[/dim]", highlight=False))  # noqa: E731
    sched: SchedulerThread | None = None
    client: KubeClient | None = None
    ok, up, started = False, False, time.monotonic()
    try:
        say("starting a local control plane (etcd, kube-apiserver, kube-controller-manager, "
            "kube-scheduler, kwok)...")
        try:
            cluster.up(spec=spec, spec_path=opts.cluster, log=say)
        except AlreadyRunning as exc:  # --keep or --state-dir pointing at a live cluster
            console.print(f"[bold red]{exc}[/bold red]", highlight=False)
            return 1
        up = True
        client = connect(str(cluster.kubeconfig))
        set_up(client, opts, {j.team for j in jobs})
        # Left open: the scheduler's background writers may log until the process ends.
        _log_to_file(state_dir / "logs" / "scheduler.log")
        sched = SchedulerThread(client)
        say(f"scheduler running in-process; its log: {state_dir / 'logs' / 'scheduler.log'}")
        driver = Driver(client, jobs, opts.speed, console, opts.live)
        ok = driver.run(opts.timeout_s)
        console.print(view.summary(driver.tracker, driver.elapsed()))
        if not ok:
            console.print("[bold red]not every job finished; see the logs above[/bold red]")
    except KeyboardInterrupt:
        console.print("\ninterrupted: cleaning up")
    finally:
        if sched is not None:
            sched.stop()
        if client is not None:
            client.close()
        if not up:
            pass  # up() stops whatever it started when it fails
        elif opts.keep and cluster.running():
            where = f" --state-dir {state_dir}" if opts.state_dir else ""
            console.print(f"cluster left running (state in {state_dir}):\n"
                          f'  eval "$(gang-scheduler dev-cluster{where} env)"\n'
                          f"  {build.kubectl_path()} get queues,podgroups.scheduling.x-k8s.io -A\n"
                          f"  gang-scheduler dev-cluster{where} down      # when done",
                          highlight=False, markup=False)
        else:
            cluster.down(log=lambda _: None)
            if own_dir and ok:
                shutil.rmtree(state_dir, ignore_errors=True)
            elif own_dir:
                console.print(f"logs kept in {state_dir / 'logs'}")
        console.print(f"demo took {time.monotonic() - started:.0f}s in all")
    return 0 if ok else 1
