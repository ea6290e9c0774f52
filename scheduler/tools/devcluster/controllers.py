"""Start kube-controller-manager and kube-scheduler against the dev cluster's apiserver.

Why the real ones: users do not create pods, their Jobs do, and the Job controller keeps acting
while gang-scheduler works (it recreates evicted pods, retries failed ones, stops at a
deadline); the garbage collector deletes what an owner leaves behind; the disruption controller
fills in PodDisruptionBudget status, which the Eviction API reads; and pods that do not ask for
gang-scheduler are placed by kube-scheduler, as on any cluster. Stand-ins for these would test
the scheduler against our guess of what Kubernetes does.

Both run as on a kubeadm cluster: their own client certificate (users
``system:kube-controller-manager`` and ``system:kube-scheduler``, which the bootstrap RBAC
roles name), controllers with per-controller ServiceAccount credentials, delegated
authentication and authorization for their own HTTPS port. Differences, each on purpose:

* leader election is off: each runs once per cluster, and a Lease renewal that misses its
  deadline on a loaded 2-core CI machine would otherwise stop every controller mid-test;
* their HTTPS ports are free loopback ports with serving certificates signed by the
  cluster CA, so the readiness probe verifies them;
* kube-controller-manager runs the controllers in `CONTROLLERS` only (what batch workloads
  and their nodes meet; no Deployments, DaemonSets, Services...), see README.md.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from scheduler.tools.devcluster import certs, controlplane, gates, kubeconfig, liveness, procs

# What a batch workload meets on a real cluster; kube-controller-manager --help lists the rest.
CONTROLLERS = (
    "job-controller",
    "disruption-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "ttl-after-finished-controller",
    "pod-garbage-collector-controller",
    "resourcequota-controller",
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    "root-ca-certificate-publisher-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    # Removes scheduling.k8s.io/podgroup-protection from a deleted PodGroup once no pod names
    # it (Kubernetes' own gang API; without it a deleted PodGroup never goes away).
    "podgroup-protection-controller",
    # Recreates the pods of a ReplicaSet (what a Deployment scales): the scheduler-plugins
    # coscheduling walkthrough's workload. The Deployment controller stays off, so deploy/'s
    # Deployment still creates no pod.
    "replicaset-controller",
    # Dynamic Resource Allocation: creates a pod's ResourceClaims from the
    # ResourceClaimTemplates it names, records them in its status.resourceClaimStatuses,
    # takes a finished pod out of reservedFor and deletes the claims made for it.
    # kube-scheduler allocates; the fake driver (dra_driver.py) publishes the devices.
    "resourceclaim-controller",
)
READY_TIMEOUT_S = 60.0
# The client-side rate limits: kubeadm's defaults (20/30) would throttle a test that creates
# Jobs of dozens of pods at once (kube-controller-manager's come with its node liveness).
API_QPS, API_BURST = liveness.STANDARD.controller_qps, liveness.STANDARD.controller_burst


def _serving_flags(pki: certs.CertPaths, stem: str, port: int,
                   client_kubeconfig: Path) -> list[str]:
    cert, key = certs.loopback_serving(pki, stem)
    return [
        "--bind-address=127.0.0.1", f"--secure-port={port}",
        f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
        f"--authentication-kubeconfig={client_kubeconfig}",
        f"--authorization-kubeconfig={client_kubeconfig}",
        # Client certificates from the cluster CA, bearer tokens through TokenReview; no
        # lookup of the front-proxy (request header) CA, which this apiserver does not have.
        f"--client-ca-file={pki.ca_cert}", "--authentication-skip-lookup=true",
    ]


def _wait_ready(proc: procs.ManagedProcess, port: int, path: str,
                pki: certs.CertPaths) -> None:
    context = controlplane.admin_ssl_context(pki)
    server = f"https://127.0.0.1:{port}"
    procs.wait_until(lambda: controlplane.get(server, path, context) == "ok",
                     READY_TIMEOUT_S, f"{proc.name} {path}", proc, interval_s=0.25)


def start_controller_manager(
        binary: Path, server: str, pki: certs.CertPaths, state_dir: Path, owned: bool,
        version: str, node_liveness: liveness.NodeLiveness = liveness.STANDARD,
) -> procs.ManagedProcess:
    """kube-controller-manager with `CONTROLLERS`, its node lifecycle controller as patient
    and its client limits as *node_liveness* says; returns once ``/healthz`` says ok."""
    name = "kube-controller-manager"
    client = kubeconfig.write_client(state_dir / "kubeconfigs" / f"{name}.kubeconfig", server,
                                     pki, name)

    def start() -> procs.ManagedProcess:
        port = procs.free_port()
        argv = [
            str(binary), f"--kubeconfig={client}", *_serving_flags(pki, name, port, client),
            "--leader-elect=false", "--use-service-account-credentials=true",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--root-ca-file={pki.ca_cert}", f"--service-account-private-key-file={pki.sa_key}",
            *node_liveness.controller_manager_flags(),
            "--profiling=false", "--v=1", gates.feature_gates_flag(name, version),
        ]
        proc = procs.spawn(name, argv, state_dir / "logs" / f"{name}.log", owned)
        _wait_ready(proc, port, "/healthz", pki)
        return proc

    return procs.start_listening(start)


def scheduler_config(client: Path, scheduler_name: str = "default-scheduler",
                     qps: float | None = API_QPS, burst: int | None = API_BURST,
                     ) -> dict[str, object]:
    """kube-scheduler's configuration: one profile (by default ``default-scheduler``, so it
    places every pod that does not name another scheduler), and no leader election.

    ``qps``/``burst`` None leave kube-scheduler's shipped client limits (50/100), which is what
    a benchmark against an out-of-the-box kube-scheduler wants.
    """
    connection: dict[str, object] = {"kubeconfig": str(client)}
    if qps is not None:
        connection["qps"] = qps
    if burst is not None:
        connection["burst"] = burst
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": connection,
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": scheduler_name}],
    }


def start_scheduler(binary: Path, server: str, pki: certs.CertPaths, state_dir: Path,
                    owned: bool, version: str, *, name: str = "kube-scheduler",
                    scheduler_name: str = "default-scheduler", qps: float | None = API_QPS,
                    burst: int | None = API_BURST, wait: bool = True) -> procs.ManagedProcess:
    """kube-scheduler with one profile; returns once ``/readyz`` says ok (its informers have
    synced), or at once with ``wait=False`` (a benchmark timing its start-up itself).

    *name* names its files (config, kubeconfig, log), so a second kube-scheduler (say a
    benchmark's, with another ``scheduler_name``) can run beside the dev cluster's own.
    """
    client = kubeconfig.write_client(state_dir / "kubeconfigs" / f"{name}.kubeconfig", server,
                                     pki, "kube-scheduler")
    config = state_dir / "config" / f"{name}.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(scheduler_config(client, scheduler_name, qps, burst),
                                     sort_keys=False), encoding="utf-8")

    def start() -> procs.ManagedProcess:
        port = procs.free_port()
        argv = [str(binary), f"--config={config}", *_serving_flags(pki, name, port, client),
                "--profiling=false", "--v=1",
                gates.feature_gates_flag("kube-scheduler", version)]
        proc = procs.spawn(name, argv, state_dir / "logs" / f"{name}.log", owned)
        if wait:
            _wait_ready(proc, port, "/readyz", pki)
        return proc

    return procs.start_listening(start)  # not waited for, a lost port shows in its log
