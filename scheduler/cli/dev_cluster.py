"""`gang-scheduler dev-cluster`: a real etcd + kube-apiserver with fake GPU nodes, locally.

For the demo and for poking at the scheduler by hand; the e2e tests start the same thing
through a pytest fixture (tests/e2e/conftest.py).
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.cli._args import integer, output_dir_problem
from scheduler.tools.devcluster import build as release_pins  # stdlib only: --help stays fast
from scheduler.tools.devcluster import liveness  # stdlib only
from scheduler.world import clusterspec

if TYPE_CHECKING:
    from scheduler.tools.devcluster.cluster import DevCluster

DEFAULT_CLUSTER = Path(clusterspec.__file__).parents[1] / "examples" / "clusters" / "dev.yaml"

DESCRIPTION = """\
A throwaway Kubernetes control plane for tests and demos: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler built from pinned sources (cached under
~/.cache/gang-scheduler/bin), TLS and RBAC like production, fake GPU nodes from a cluster
description, run by kwok (node Leases, and the pods' lifecycle).

State (certificates, etcd data, logs, kubeconfig) lives in --state-dir, by default
$XDG_STATE_HOME/gang-scheduler/dev-cluster or $GANG_SCHEDULER_DEV_CLUSTER_DIR, so `up` in one
shell and `env` / `down` in another find the same cluster.
"""

EPILOG = """\
examples:
  gang-scheduler dev-cluster build                 # build or reuse etcd + kube-apiserver
  gang-scheduler dev-cluster up                    # start with the shipped 8-node dev cluster
  eval "$(gang-scheduler dev-cluster env)"         # point kubectl / the scheduler at it
  gang-scheduler dev-cluster up --cluster my.yaml --foreground   # stop with Ctrl-C
  gang-scheduler dev-cluster token -n gang-scheduler-system -s gang-scheduler \\
      --kubeconfig-out sa.kubeconfig               # a ServiceAccount identity
  gang-scheduler dev-cluster down
  gang-scheduler dev-cluster --kubernetes 1.37 up  # Kubernetes 1.37 (gang API v1beta1)
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "dev-cluster", help="run a local etcd + kube-apiserver with fake GPU nodes",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="directory with the cluster's state (default: see above)")
    releases = sorted(release_pins.RELEASES)
    release_help = (f"Kubernetes release to build and run (default: ${release_pins.RELEASE_ENV}"
                    f" or {release_pins.DEFAULT_RELEASE}); 1.36 serves the gang API at "
                    "scheduling.k8s.io/v1alpha2, 1.37 at v1beta1")
    parser.add_argument("--kubernetes", choices=releases, default=None, help=release_help)
    # The same options after the subcommand (`dev-cluster up --state-dir X`) as before it: a
    # parent whose defaults are SUPPRESS, so they never overwrite a value given before.
    state = argparse.ArgumentParser(add_help=False)
    state.add_argument("--state-dir", type=Path, default=argparse.SUPPRESS,
                       help="directory with the cluster's state (default: see "
                       "`dev-cluster --help`)")
    state.add_argument("--kubernetes", choices=releases, default=argparse.SUPPRESS,
                       help=release_help)

    def usage(_args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(handler=usage)
    sub = parser.add_subparsers(dest="dev_cluster_command", metavar="SUBCOMMAND")

    p = sub.add_parser("build", parents=[state],
                       help="build or reuse the dev cluster's binaries",
                       description="Build the pinned etcd, kube-apiserver, "
                       "kube-controller-manager, kube-scheduler, kubectl, kwok, JobSet, "
                       "Kubeflow Trainer, Kueue and training-operator v1 with Go, or reuse the "
                       "cached binaries (a no-op taking well under a second when cached).")
    p.set_defaults(handler=_checked(_build))

    p = sub.add_parser("up", parents=[state], help="start a fresh dev cluster",
                       description="Start etcd, kube-apiserver, kube-controller-manager, "
                       "kube-scheduler, kwok and the training operators (JobSet, Kubeflow "
                       "Trainer), create the cluster's fake nodes, and print how to use it.",
                       epilog="example: gang-scheduler dev-cluster up --cluster "
                       "scheduler/examples/clusters/dev.yaml",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", type=Path, default=DEFAULT_CLUSTER, metavar="FILE",
                   help=f"cluster description YAML (default: {DEFAULT_CLUSTER.name}, shipped)")
    p.add_argument("--foreground", action="store_true",
                   help="stay attached and stop the cluster on Ctrl-C or SIGTERM")
    p.add_argument("--without-training-operators", action="store_true",
                   help="leave out JobSet and Kubeflow Trainer (their CRDs, webhooks and "
                   "controllers): a faster start, and no Go build of them on first use")
    p.add_argument("--with-kueue", action="store_true",
                   help="also start Kueue (its CRDs, webhooks and controller manager, for "
                   "batch/v1 Jobs): quota and admission above gang-scheduler, see the README's "
                   "'Under Kueue'")
    p.add_argument("--with-training-operator-v1", action="store_true",
                   help="also start Kubeflow training-operator v1's PyTorchJob and MPIJob "
                   "controllers (their CRDs; no webhooks, no PodGroups: gang-scheduler sizes "
                   "the gang from the job), see the README's operator recipe")
    p.add_argument("--with-kuberay", action="store_true",
                   help="also start the KubeRay operator (RayCluster, RayJob, RayService; no "
                   "webhooks), see the README's 'With KubeRay'")
    p.add_argument("--autoscale", action="append", default=[], metavar="POOL=[MIN:]MAX",
                   help="also start the real cluster-autoscaler (kwok provider, "
                   "ProvisioningRequests) with a node group of this pool of --cluster growing "
                   "up to MAX nodes; repeatable; see the README's 'With the cluster-autoscaler'")
    p.add_argument("--without-dra-devices", action="store_true",
                   help="start no fake DRA driver: the nodes' GPUs are not published as "
                   "resource.k8s.io ResourceSlices (for thousands of nodes)")
    p.add_argument("--node-liveness", choices=sorted(liveness.PROFILES),
                   default=liveness.STANDARD.name,
                   help="how the fake nodes prove they are alive: standard (node Leases and "
                   "the kubelet's heartbeats, what the tests use) or scale (no Leases, "
                   "heartbeats every 30-60 min, a 2-hour grace period: for thousands of nodes; "
                   "see scheduler/tools/devcluster/liveness.py)")
    p.set_defaults(handler=_checked(_up))

    p = sub.add_parser("down", parents=[state],
                       help="stop the dev cluster (all its processes)")
    p.set_defaults(handler=_checked(_down))

    p = sub.add_parser("env", parents=[state], help="print `export KUBECONFIG=...` for eval",
                       epilog='examples:\n  eval "$(gang-scheduler dev-cluster env)"\n'
                       '  gang-scheduler run --kubeconfig "$(gang-scheduler dev-cluster env '
                       '--kubeconfig-path)" --no-leader-election',
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig-path", action="store_true",
                   help="print only the admin kubeconfig's path (for --kubeconfig \"$(...)\")")
    p.set_defaults(handler=_checked(_env))

    p = sub.add_parser(
        "token", parents=[state],
        help="mint a ServiceAccount token (TokenRequest) and optionally a kubeconfig",
        description="Issue a short-lived token for a ServiceAccount, creating the namespace and "
        "account if missing. Prints the token, or writes a kubeconfig with --kubeconfig-out.",
        epilog="example: gang-scheduler dev-cluster token -n default -s viewer --duration 600")
    p.add_argument("-n", "--namespace", required=True)
    p.add_argument("-s", "--service-account", required=True)
    p.add_argument("--duration", type=integer(minimum=600), default=3600,
                   help="seconds, at least 600 (the apiserver's minimum; default 3600)")
    p.add_argument("--kubeconfig-out", type=Path, help="write a kubeconfig here")
    p.set_defaults(handler=_checked(_token))


class _BadStateDir(Exception):
    pass


def _cluster(args: argparse.Namespace, owned: bool = False) -> DevCluster:
    from scheduler.tools.devcluster.cluster import DevCluster  # lazy: keeps `--help` fast

    if args.state_dir is not None and (problem := output_dir_problem(args.state_dir)):
        raise _BadStateDir(f"--state-dir {args.state_dir}: {problem}")
    return DevCluster(args.state_dir, owned=owned)


def _checked(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A subcommand handler that reports an unusable --state-dir as one line, exit code 2."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        if getattr(args, "kubernetes", None):
            # The one place the release is chosen: build, the cluster and its children read it.
            os.environ[release_pins.RELEASE_ENV] = args.kubernetes
        try:
            return handler(args)
        except _BadStateDir as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return run


def _build(args: argparse.Namespace) -> int:
    from scheduler.tools.devcluster import build

    try:
        build.ensure_all()
    except build.BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _up(args: argparse.Namespace) -> int:
    from scheduler.tools.devcluster import autoscaler
    from scheduler.tools.devcluster.cluster import AlreadyRunning

    try:
        spec = clusterspec.load(args.cluster)
    except clusterspec.ClusterSpecError as exc:  # names the file, the field and the reason
        print(f"error: --cluster {exc}", file=sys.stderr)
        return 2
    try:
        groups = [autoscaler.NodeGroupSpec.parse(text) for text in args.autoscale]
        for group in groups:
            autoscaler.template(spec, group)  # the pool must be one of --cluster's
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cluster = _cluster(args, owned=args.foreground)
    try:
        cluster.up(spec, args.cluster.resolve(),
                   training_operators=not args.without_training_operators,
                   node_liveness=liveness.by_name(args.node_liveness),
                   dra_devices=not args.without_dra_devices)
        try:
            if args.with_kueue:
                cluster.start_kueue()
            if args.with_training_operator_v1:
                cluster.start_training_operator_v1()
            if args.with_kuberay:
                cluster.start_kuberay()
            if groups:
                cluster.start_autoscaler(spec, groups)
        except BaseException:
            cluster.down()
            raise
    except AlreadyRunning as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"\n{_export(cluster.kubeconfig)}\n# logs: {cluster.state_dir / 'logs'}")
    if not args.foreground:
        print(f"# stop with: {_again(args, 'down')}")
        return 0
    print("# running in the foreground; Ctrl-C stops it")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while cluster.running():
            time.sleep(1.0)
        print("error: a dev cluster process exited; stopping", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.down()


def _down(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    if not cluster.down():
        print(f"no dev cluster running from {cluster.state_dir}")
    return 0


def _env(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    if not cluster.running():
        print(f"error: no dev cluster running from {cluster.state_dir}; run "
              f"`{_again(args, 'up')}`", file=sys.stderr)
        return 1
    print(cluster.kubeconfig if args.kubeconfig_path else _export(cluster.kubeconfig))
    return 0


def _token(args: argparse.Namespace) -> int:
    from scheduler.tools.devcluster import kubeconfig

    cluster = _cluster(args)
    if not cluster.running():
        print(f"error: no dev cluster running from {cluster.state_dir}", file=sys.stderr)
        return 1
    if args.kubeconfig_out:
        path = cluster.service_account_kubeconfig(
            args.namespace, args.service_account, args.duration, create=True,
            path=args.kubeconfig_out)
        print(f"wrote {path} for system:serviceaccount:{args.namespace}:{args.service_account}")
        return 0
    print(kubeconfig.mint_service_account_token(
        cluster.api_client(), args.namespace, args.service_account, args.duration, create=True))
    return 0


def _again(args: argparse.Namespace, subcommand: str) -> str:
    """The command that reaches the same cluster: with the ``--state-dir`` this one was
    given (without it, a hint sends a person to the default directory's cluster, or none)."""
    where = f" --state-dir {shlex.quote(str(args.state_dir))}" if args.state_dir else ""
    return f"gang-scheduler dev-cluster{where} {subcommand}"


def _export(path: Path) -> str:
    return f"export KUBECONFIG={shlex.quote(str(path))}"
