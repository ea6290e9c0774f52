"""`gang-scheduler run`: the live scheduler."""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from http.server import ThreadingHTTPServer
from types import FrameType
from typing import TYPE_CHECKING

from scheduler.cli._kube import CONTEXT_HELP, KUBECONFIG_HELP
from scheduler.model.numerals import is_digits

if TYPE_CHECKING:
    from scheduler.feed.admission import Defaults
    from scheduler.kube.runner import LiveScheduler
    from scheduler.run.config import SchedulerConfig

EPILOG = """\
examples:
  # inside a cluster (the deploy/ Deployment does this)
  gang-scheduler run --config /etc/gang-scheduler/config.yaml

  # against the local dev cluster
  gang-scheduler dev-cluster up
  gang-scheduler run --kubeconfig "$(gang-scheduler dev-cluster env --kubeconfig-path)" \\
      --no-leader-election

  # also serving the admission webhook (README "Defaults at admission")
  gang-scheduler run --config config.yaml --webhook-address 0.0.0.0:9443 \\
      --webhook-cert tls.crt --webhook-key tls.key

Pods opt in with `schedulerName: gang-scheduler`. A pod joins a gang through the
`scheduling.x-k8s.io/pod-group` label (scheduler-plugins PodGroup), Volcano's
`scheduling.k8s.io/group-name` annotation, or its batch/v1 Job; any other pod is a gang of
one. The queue comes from the `gangscheduler.io/queue` label on the PodGroup or the pod.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run the scheduler against a cluster",
                       description="Watch the cluster and place pending gangs all-or-nothing.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", metavar="FILE", help="scheduler config YAML (see deploy/)")
    p.add_argument("--kubeconfig", metavar="FILE", help=KUBECONFIG_HELP)
    p.add_argument("--context", metavar="NAME", help=CONTEXT_HELP)
    p.add_argument("--scheduler-name", metavar="NAME",
                   help="schedulerName this scheduler serves (default: gang-scheduler)")
    p.add_argument("--metrics-address", metavar="HOST:PORT",
                   help="serve /metrics, /healthz, /readyz and the read-only dashboard "
                   "(/dashboard, /api/v1/state) here (default 0.0.0.0:8080)")
    p.add_argument("--webhook-address", metavar="HOST:PORT",
                   help="serve the admission webhook (HTTPS: /mutate, /validate) here; "
                   "turns it on (default: the config's webhook.bindAddress when enabled)")
    p.add_argument("--webhook-cert", metavar="FILE",
                   help="the webhook's serving certificate (PEM; read again when it changes)")
    p.add_argument("--webhook-key", metavar="FILE", help="the webhook's private key (PEM)")
    p.add_argument("--gpu-metrics-url", metavar="URL",
                   help="Prometheus holding the GPU metrics (dcgm-exporter) to show idle GPUs, "
                   "straggler and missing ranks per gang; overrides the config's "
                   "gpuMetrics.prometheus and turns the join on")
    p.add_argument("--no-leader-election", action="store_true",
                   help="run without a Lease (only when a single replica runs)")
    p.add_argument("--identity", metavar="ID", help="leader election identity (default: host-pid)")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"))
    p.add_argument("--log-format", choices=("auto", "json", "console"))
    p.set_defaults(handler=run)


def _address(text: str) -> tuple[str, int] | None:
    host, sep, port = text.rpartition(":")
    if not sep or not is_digits(port) or int(port) > 65535:
        return None
    return host or "0.0.0.0", int(port)


def run(args: argparse.Namespace) -> int:
    from scheduler.cli._kube import ConnectError, connect, unreachable
    from scheduler.kube.client import ApiError, TransportError
    from scheduler.kube.runner import LiveScheduler
    from scheduler.run.config import ConfigError, load_config
    from scheduler.run.logconfig import configure_logging
    from scheduler.run.serve import serve

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"error: --config {exc}", file=sys.stderr)
        return 2
    if args.metrics_address and _address(args.metrics_address) is None:
        print(f"error: --metrics-address {args.metrics_address!r}: expected HOST:PORT "
              "(port 0-65535)", file=sys.stderr)
        return 2
    overrides: dict[str, object] = {}
    if args.scheduler_name:
        overrides["scheduler_name"] = args.scheduler_name
    if args.metrics_address:
        overrides["metrics_bind_address"] = args.metrics_address
    if args.log_level:
        overrides["log_level"] = args.log_level
    if args.log_format:
        overrides["log_format"] = args.log_format
    if args.webhook_address and _address(args.webhook_address) is None:
        print(f"error: --webhook-address {args.webhook_address!r}: expected HOST:PORT "
              "(port 0-65535)", file=sys.stderr)
        return 2
    if args.webhook_address or args.webhook_cert or args.webhook_key:
        given = config.webhook
        overrides["webhook"] = dataclasses.replace(
            given, enabled=True, bind_address=args.webhook_address or given.bind_address,
            cert_file=args.webhook_cert or given.cert_file,
            key_file=args.webhook_key or given.key_file)
    if args.gpu_metrics_url:
        from scheduler.run.config import gpu_metrics_at
        try:
            overrides["gpu_metrics"] = gpu_metrics_at(config.gpu_metrics, args.gpu_metrics_url)
        except ConfigError as exc:
            print(f"error: --gpu-metrics-url {exc}", file=sys.stderr)
            return 2
    if args.no_leader_election:
        overrides["leader_election"] = dataclasses.replace(config.leader_election, enabled=False)
    config = dataclasses.replace(config, **overrides)  # type: ignore[arg-type]
    configure_logging(config.log_level, config.log_format)  # type: ignore[arg-type]

    address = _address(config.metrics_bind_address)
    assert address is not None  # checked by load_config and above
    try:
        client = connect(args.kubeconfig, context=args.context,
                         pool_maxsize=max(64, config.bind_concurrency * 2))
    except ConnectError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    live = LiveScheduler(config, client, identity=args.identity)
    try:
        server = serve(live.metrics.registry, live.health, *address,
                       view=live.view if config.dashboard else None,
                       chargeback=live.chargeback if config.dashboard else None)
    except OSError as exc:
        print(f"error: metrics address {config.metrics_bind_address}: cannot listen: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2

    def _stop(signum: int, _frame: FrameType | None) -> None:
        live.stop_event.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    hook = None
    try:
        live.start()
        if config.webhook.enabled:  # once the Queues are read: a namespace's queue is known
            hook = _serve_webhook(config, live)
            if hook is None:
                return 2
        live.run()
    except (TimeoutError, TransportError, ApiError) as exc:
        print(f"error: {unreachable(exc)}", file=sys.stderr)
        return 1
    finally:
        live.stop()
        server.shutdown()
        if hook is not None:
            hook.shutdown()
    return 0


def _serve_webhook(config: SchedulerConfig, live: LiveScheduler) -> ThreadingHTTPServer | None:
    """The admission webhook on its own HTTPS port, or None (an error printed)."""
    import ssl
    import time
    from pathlib import Path

    from scheduler.feed.admission import namespace_defaults
    from scheduler.run.webhook import serve_webhook

    hook = config.webhook
    address = _address(hook.bind_address)
    assert address is not None  # checked by load_config and run()

    def defaults_of(namespace: str) -> Defaults:
        return namespace_defaults(config.scheduler_name, live.policies.current().queues,
                                  namespace)

    try:
        return serve_webhook(
            defaults_of, time.time, *address, Path(hook.cert_file), Path(hook.key_file),
            counted=lambda webhook, result: live.metrics.admission_reviews.labels(
                webhook, result).inc())
    except ssl.SSLError as exc:
        print(f"error: webhook certificate {hook.cert_file} / key {hook.key_file}: {exc}",
              file=sys.stderr)
    except OSError as exc:
        what = exc.filename or hook.bind_address
        print(f"error: webhook: {what}: {exc.strerror or exc}", file=sys.stderr)
    return None
