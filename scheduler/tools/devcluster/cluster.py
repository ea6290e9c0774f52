"""`DevCluster`: bring a whole dev cluster up or down, from the CLI or from a test fixture.

Why one object for both: the CLI and the pytest fixture must start exactly the same thing.
The only difference is ownership. An *owned* cluster (tests, ``up --foreground``) dies with the
process that started it: atexit, SIGTERM/SIGHUP handlers and PR_SET_PDEATHSIG on the children.
A detached one (plain ``up``) outlives the command and is found again through the state file.

Layout of a state directory (only these entries are ever deleted, so pointing ``--state-dir``
at a directory with other files in it is safe)::

    state.json  kubeconfig  pki/  etcd-data/  apiserver-certs/  kubeconfigs/  config/  logs/
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from kubernetes import client

from scheduler.model.nodes import DEFAULT_TOPOLOGY_LABELS
from scheduler.tools.devcluster import (
    autoscaler,
    build,
    certs,
    controllers,
    controlplane,
    crds,
    dra_driver,
    kubeconfig,
    kwok,
    liveness,
    nodes,
    operators,
    procs,
    rest,
    state,
)
from scheduler.world import clusterspec

Log = Callable[[str], None]
OWNED_ENTRIES = ("state.json", "kubeconfig", "pki", "etcd-data", "apiserver-certs",
                 "kubeconfigs", "config", "serving-certs", "logs")
CONTROLLERS_READY_TIMEOUT_S = 60.0


class AlreadyRunning(RuntimeError):
    """`up` found a live cluster in the state directory."""


class DevCluster:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (the fake nodes'
    kubelets) and the fake DRA driver, rooted at one state directory."""

    def __init__(self, state_dir: Path | None = None, owned: bool = False) -> None:
        self.state_dir = (state_dir or state.default_state_dir()).resolve()
        self.owned = owned
        self.state: state.ClusterState | None = state.load(self.state_dir)
        self._handlers_installed = False

    # Queries -------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    def running(self) -> bool:
        """True if every recorded process is alive."""
        return bool(self.state and self.state.processes
                    and all(procs.is_alive(p) for p in self.state.processes))

    def api_client(self) -> client.ApiClient:
        return kubeconfig.api_client(self.kubeconfig)

    def service_account_kubeconfig(self, namespace: str, name: str, seconds: int = 3600,
                                   create: bool = True, path: Path | None = None) -> Path:
        """Mint a token for ServiceAccount `namespace/name` and write a kubeconfig using it."""
        if self.state is None:
            raise RuntimeError(f"no dev cluster recorded in {self.state_dir}; run `up` first")
        token = kubeconfig.mint_service_account_token(self.api_client(), namespace, name,
                                                      seconds, create)
        out = path or self.state_dir / "kubeconfigs" / f"{namespace}.{name}.kubeconfig"
        ca = certs.CertPaths.under(self.state_dir / "pki").ca_cert
        user = f"system:serviceaccount:{namespace}:{name}"
        return kubeconfig.write_token(out, self.state.server, ca, user, token)

    # Lifecycle -----------------------------------------------------------------------------
    def up(self, spec: clusterspec.ClusterSpec | None = None, spec_path: Path | None = None,
           log: Log = build.say, install_crds: bool = True, training_operators: bool = True,
           node_liveness: liveness.NodeLiveness = liveness.STANDARD,
           dra_devices: bool = True) -> state.ClusterState:
        """Start a fresh cluster (new certificates, empty etcd) and create `spec`'s nodes.

        ``install_crds=False`` leaves the project's CRDs out, for whoever installs them the
        way an admin would (``kubectl apply -k deploy/``): deleting them again instead would
        wait on the apiserver's CRD finalizer, which can take minutes on a loaded machine.
        ``training_operators=False`` leaves out JobSet and Kubeflow Trainer (no build of
        them, a faster start) for tests that need neither. *node_liveness*: how the fake
        nodes prove they are alive (``liveness.SCALE`` for thousands of nodes).
        ``dra_devices=False`` starts no fake DRA driver: no node publishes its GPUs as a
        ResourceSlice (a benchmark of thousands of nodes would pay a write per node).
        """
        if self.state and any(procs.is_alive(p) for p in self.state.processes):
            raise AlreadyRunning(f"a dev cluster is already running from {self.state_dir} "
                                 f"(KUBECONFIG={self.kubeconfig}); run `down` first")
        started = time.monotonic()
        binaries = build.ensure_all(log, training_operators)
        self._wipe()
        if self.owned:
            self._install_cleanup()
        try:
            self.state = self._start(binaries, spec_path, log, install_crds,
                                     training_operators, node_liveness)
            if dra_devices:
                self._start_dra_driver(spec, log)
            if spec is not None:
                t0 = time.monotonic()
                names = nodes.create_from_spec(self.api_client(), spec)
                if dra_devices:
                    dra_driver.wait_published(self.api_client(), names)
                log(f"created {len(names)} fake nodes in {time.monotonic() - t0:.1f}s")
        except BaseException:
            log("dev cluster failed to start; stopping what did start "
                f"(logs in {self.state_dir / 'logs'})")
            self.down(log=lambda _: None)
            raise
        log(f"dev cluster up in {time.monotonic() - started:.1f}s: {self.state.server}")
        return self.state

    def _start(self, binaries: dict[str, Path], spec_path: Path | None, log: Log,
               install_crds: bool, training_operators: bool,
               node_liveness: liveness.NodeLiveness) -> state.ClusterState:
        logs = self.state_dir / "logs"
        pki = certs.generate(self.state_dir / "pki")
        t0 = time.monotonic()
        etcd, etcd_url = controlplane.start_etcd(binaries["etcd"], self.state_dir / "etcd-data",
                                                 logs, self.owned)
        st = state.ClusterState(
            state_dir=str(self.state_dir), server="", etcd=etcd_url,
            kubeconfig=str(self.kubeconfig), processes=[etcd],
            versions={c.name: c.version for c in build.components(operators=False)},
            cluster_spec=str(spec_path) if spec_path else None,
            node_liveness=node_liveness.name,
        )
        self.state = st
        state.save(st)  # from here on, `down` can find what is running
        log(f"etcd ready in {time.monotonic() - t0:.1f}s at {etcd_url}")
        t0 = time.monotonic()
        apiserver, st.server = controlplane.start_apiserver(
            binaries["kube-apiserver"], etcd_url, pki, self.state_dir, self.owned,
            build.KUBE_APISERVER.version)
        st.processes.append(apiserver)
        state.save(st)
        log(f"kube-apiserver ready in {time.monotonic() - t0:.1f}s at {st.server}")
        kubeconfig.write_admin(self.kubeconfig, st.server, pki)
        if install_crds:
            crds.apply(self.api_client())
            crds.apply_provisioning_requests(self.api_client())
        self._start_controllers(binaries, pki, log, node_liveness)
        t0 = time.monotonic()
        st.processes.append(kwok.start_kwok(binaries["kwok"], st.server, pki, self.state_dir,
                                            self.owned, node_liveness))
        state.save(st)
        log(f"kwok ready in {time.monotonic() - t0:.1f}s")
        if training_operators:
            self.start_training_operators(log)
        return st

    def start_training_operators(self, log: Log = build.say) -> None:
        """Start JobSet and Kubeflow Trainer (with their CRDs, RBAC and webhooks) in a running
        cluster. Trainer needs the PodGroup CRD: `up` installs it first; a cluster started
        with ``install_crds=False`` calls this once whoever installs the CRDs has."""
        st = self.state
        if st is None:
            raise RuntimeError(f"no dev cluster recorded in {self.state_dir}; run `up` first")
        pki = certs.CertPaths.under(self.state_dir / "pki")
        for operator in operators.OPERATORS:
            build.ensure(operator.component, log)
            t0 = time.monotonic()
            st.processes.append(operators.start(operator, self.api_client(), st.server, pki,
                                                self.state_dir, self.owned))
            st.versions[operator.component.name] = operator.component.version
            state.save(st)
            log(f"{operator.component.name} ready in {time.monotonic() - t0:.1f}s")

    def start_kueue(self, log: Log = build.say) -> None:
        """Start Kueue (its CRDs, RBAC, webhooks and controller manager, batch/v1 Jobs only)
        in a running cluster: quota and admission above gang-scheduler (``operators.KUEUE``).
        Not part of `up`: its Job webhook would see every Job of every test."""
        self._start_on_demand(operators.KUEUE, log)

    def start_training_operator_v1(self, log: Log = build.say) -> None:
        """Start Kubeflow training-operator v1's PyTorchJob and MPIJob controllers (their
        CRDs and RBAC; no webhooks, no PodGroups) in a running cluster
        (``operators.TRAINING_OPERATOR_V1``). Not part of `up`: they watch every pod and
        Service of every test."""
        self._start_on_demand(operators.TRAINING_OPERATOR_V1, log)
    def start_kuberay(self, log: Log = build.say) -> None:
        """Start the KubeRay operator (its CRDs, RBAC and controllers, no webhooks) in a
        running cluster (``operators.KUBERAY``). Not part of `up`: only RayCluster and RayJob
        tests need it, and its CRDs alone are 3 MB to install."""
        self._start_on_demand(operators.KUBERAY, log)

    def _start_on_demand(self, operator: operators.Operator, log: Log) -> None:
        st = self.state
        if st is None:
            raise RuntimeError(f"no dev cluster recorded in {self.state_dir}; run `up` first")
        build.ensure(operator.component, log)
        t0 = time.monotonic()
        pki = certs.CertPaths.under(self.state_dir / "pki")
        st.processes.append(operators.start(operator, self.api_client(), st.server, pki,
                                            self.state_dir, self.owned))
        st.versions[operator.component.name] = operator.component.version
        state.save(st)
        log(f"{operator.component.name} ready in {time.monotonic() - t0:.1f}s")

    def start_autoscaler(self, spec: clusterspec.ClusterSpec,
                         groups: Sequence[autoscaler.NodeGroupSpec],
                         log: Log = build.say,
                         max_nodes_total: int | None = None) -> procs.ManagedProcess:
        """Start the real cluster-autoscaler (kwok provider, ProvisioningRequests on) with one
        node group per entry of *groups*, each a pool of *spec* (``autoscaler.template``).
        Not part of `up`: it acts on every unschedulable pod of the cluster, and it reads its
        node groups only at start (`stop_autoscaler` first to declare others).
        *max_nodes_total*: its ``--max-nodes-total`` (the whole cluster's nodes)."""
        st = self.state
        if st is None:
            raise RuntimeError(f"no dev cluster recorded in {self.state_dir}; run `up` first")
        templates = [autoscaler.template(spec, g) for g in groups]  # bad groups: before a build
        build.ensure(build.CLUSTER_AUTOSCALER, log)
        t0 = time.monotonic()
        proc = autoscaler.start(self.api_client(), st.server,
                                certs.CertPaths.under(self.state_dir / "pki"), self.state_dir,
                                self.owned, templates, max_nodes_total)
        st.processes.append(proc)
        st.versions[build.CLUSTER_AUTOSCALER.name] = build.CLUSTER_AUTOSCALER.version
        state.save(st)
        log(f"{autoscaler.IDENTITY} ready in {time.monotonic() - t0:.1f}s, node groups: "
            + ", ".join(f"{g.pool} ({g.min_count}-{g.max_count})" for g in groups))
        return proc

    def stop_autoscaler(self) -> None:
        """Stop the autoscaler (SIGTERM: on its way out it deletes its groups' nodes)."""
        st = self.state
        if st is None:
            return
        for proc in [p for p in st.processes if p.name == autoscaler.IDENTITY]:
            procs.stop(proc, grace_s=30.0)
            st.processes.remove(proc)
        st.versions.pop(build.CLUSTER_AUTOSCALER.name, None)
        state.save(st)

    def _start_dra_driver(self, spec: clusterspec.ClusterSpec | None, log: Log) -> None:
        """The fake DRA driver, with the topology labels of *spec* (its devices' NVLink
        domain is the innermost one a node carries)."""
        st = self.state
        assert st is not None
        t0 = time.monotonic()
        labels = spec.topology_labels if spec is not None else DEFAULT_TOPOLOGY_LABELS
        st.processes.append(dra_driver.start(
            self.api_client(), st.server, certs.CertPaths.under(self.state_dir / "pki"),
            self.state_dir, self.owned, labels))
        state.save(st)
        log(f"fake DRA driver ready in {time.monotonic() - t0:.1f}s")

    def _start_controllers(self, binaries: dict[str, Path], pki: certs.CertPaths,
                           log: Log, node_liveness: liveness.NodeLiveness) -> None:
        st = self.state
        assert st is not None
        t0 = time.monotonic()
        st.processes.append(controllers.start_controller_manager(
            binaries["kube-controller-manager"], st.server, pki, self.state_dir, self.owned,
            build.KUBE_CONTROLLER_MANAGER.version, node_liveness))
        state.save(st)
        # Its serviceaccount controller at work is the proof that the controllers run with
        # working credentials (without `default` ServiceAccounts no pod can be created).
        core = client.CoreV1Api(self.api_client())
        procs.wait_until(lambda: rest.exists(core.read_namespaced_service_account, "default",
                                         "default"),
                         CONTROLLERS_READY_TIMEOUT_S, "ServiceAccount default/default",
                         st.processes[-1], interval_s=0.25)
        log(f"kube-controller-manager ready in {time.monotonic() - t0:.1f}s")
        t0 = time.monotonic()
        st.processes.append(controllers.start_scheduler(
            binaries["kube-scheduler"], st.server, pki, self.state_dir, self.owned,
            build.KUBE_SCHEDULER.version))
        state.save(st)
        log(f"kube-scheduler ready in {time.monotonic() - t0:.1f}s")

    def down(self, log: Log = build.say) -> bool:
        """Stop every recorded process, the last started first (etcd last).

        Returns True if something was running. Files are kept for post-mortems; the next `up`
        replaces them.
        """
        current = self.state or state.load(self.state_dir)
        if current is None:
            return False
        was_running = False
        for proc in reversed(current.processes):
            if procs.is_alive(proc):
                was_running = True
                killed = procs.stop(proc)
                log(f"stopped {proc.name} (pid {proc.pid}{', SIGKILL' if killed else ''})")
        state.remove(self.state_dir)
        self.state = None
        return was_running

    def restart(self, name: str, log: Log = build.say) -> float:
        """Crash one component (SIGKILL, as a machine or OOM kill would) and start it again
        with the same command line, ports and data; returns once it serves again, with the
        seconds it took. For fault tests: ``etcd`` and ``kube-apiserver`` keep their ports,
        so every client finds them again at the same address."""
        st = self.state
        if st is None:
            raise RuntimeError(f"no dev cluster recorded in {self.state_dir}; run `up` first")
        i, old = next(((i, p) for i, p in enumerate(st.processes) if p.name == name),
                      (-1, None))
        if old is None or not old.argv:
            raise ValueError(f"no restartable process {name!r} in this dev cluster "
                             f"(have: {', '.join(p.name for p in st.processes)})")
        started = time.monotonic()
        procs.kill(old)
        new = procs.spawn(name, old.argv, Path(old.log), self.owned)
        st.processes[i] = new
        state.save(st)
        context = controlplane.admin_ssl_context(certs.CertPaths.under(self.state_dir / "pki"))

        def serving() -> bool:  # (the apiserver's /readyz checks its etcd too)
            return controlplane.get(st.server, "/readyz", context) == "ok"
        ready = {"etcd": lambda: controlplane.etcd_healthy(st.etcd) and serving(),
                 "kube-apiserver": serving}
        check = ready.get(name)
        if check is not None:
            procs.wait_until(check, controlplane.APISERVER_READY_TIMEOUT_S, f"{name} ready",
                             new, interval_s=0.1)
        seconds = time.monotonic() - started
        log(f"restarted {name} in {seconds:.1f}s (pid {new.pid})")
        return seconds

    # Helpers -------------------------------------------------------------------------------
    def _wipe(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for name in OWNED_ENTRIES:
            path = self.state_dir / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)

    def _install_cleanup(self) -> None:
        if self._handlers_installed:
            return
        self._handlers_installed = True
        atexit.register(self.down, log=lambda _: None)
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous = signal.getsignal(sig)

            def handler(signum: int, frame: FrameType | None, previous: Any = previous) -> None:
                self.down(log=lambda _: None)
                if callable(previous):
                    previous(signum, frame)
                else:
                    signal.signal(signum, signal.SIG_DFL)
                    os.kill(os.getpid(), signum)

            signal.signal(sig, handler)

