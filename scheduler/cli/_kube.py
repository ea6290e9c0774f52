"""Connecting to the apiserver for a subcommand, with one-line errors for bad kubeconfigs.

The kubernetes client reports a missing, empty or malformed kubeconfig with its own
exceptions (and, for some shapes, a bare ``TypeError``); a person running ``explain`` or
``run`` should read which file is wrong and why, not a traceback.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from scheduler.world.clusterspec import read_problem, yaml_problem

if TYPE_CHECKING:
    from scheduler.kube.client import KubeClient

NOT_IN_CLUSTER = ("no kubeconfig found (no --kubeconfig, $KUBECONFIG is not set, no "
                  "~/.kube/config) and not running in a cluster (no service account token; "
                  "KUBERNETES_SERVICE_HOST is not set); pass --kubeconfig FILE")

#: What ``--kubeconfig`` says in every command's help: the order kubectl uses.
KUBECONFIG_HELP = ("kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config, else the "
                   "in-cluster service account)")
CONTEXT_HELP = "kubeconfig context to use (default: the kubeconfig's current-context)"


class ConnectError(Exception):
    """The kubeconfig (or the in-cluster identity) cannot be used; the message says why."""


def kubeconfig_source(flag: str | None, environ: Mapping[str, str] | None = None,
                      home: Path | None = None) -> tuple[str | None, str]:
    """Which kubeconfig to read, as kubectl picks it, and how to name it in an error.

    ``--kubeconfig`` first, then ``$KUBECONFIG`` (the first existing file of a colon-separated
    list), then ``~/.kube/config`` if it exists; None means the in-cluster service account.
    """
    env = os.environ if environ is None else environ
    if flag:
        return flag, f"--kubeconfig {flag}"
    listed = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        first = next((p for p in listed if Path(p).expanduser().exists()), listed[0])
        return str(Path(first).expanduser()), f"$KUBECONFIG {first}"
    default = (home or Path.home()) / ".kube" / "config"
    if default.is_file():
        return str(default), f"kubeconfig {default}"
    return None, "the in-cluster service account"


def connect(kubeconfig: str | None, *, context: str | None = None,
            pool_maxsize: int = 64) -> KubeClient:
    from kubernetes.config.config_exception import ConfigException

    from scheduler.kube import client

    path, where = kubeconfig_source(kubeconfig)
    if path:
        candidate = Path(path)
        if candidate.is_dir():
            raise ConnectError(f"{where}: is a directory, expected a file")
        if not candidate.exists():
            raise ConnectError(f"{where}: no such file")
    elif context:
        raise ConnectError(f"--context {context}: no kubeconfig to take it from ({NOT_IN_CLUSTER})")
    try:
        return client.connect(path, context=context, pool_maxsize=pool_maxsize)
    except ConfigException as exc:
        if not path:
            raise ConnectError(NOT_IN_CLUSTER) from None
        if context and "context" in str(exc).lower():
            raise ConnectError(f"{where}: no context {context!r} ({exc})") from None
        raise ConnectError(f"{where}: not a usable kubeconfig: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConnectError(f"{where}: {yaml_problem(exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConnectError(f"{where}: {read_problem(exc)}") from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        # the client indexes into whatever the YAML contains: a list where a mapping belongs...
        raise ConnectError(f"{where}: not a valid kubeconfig ({type(exc).__name__}: {exc})"
                           ) from None


def unreachable(exc: Exception) -> str:
    """A transport or API failure while talking to the apiserver, on one line."""
    from scheduler.kube.client import ApiError

    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, ApiError):
        return f"the apiserver refused the request: {text}"
    # urllib3 nests the cause three deep; keep the host and the last reason
    host = re.search(r"host='([^']*)', port=(\d+)", text)
    reason = re.findall(r"(\[Errno -?\d+\] [^'\")]+|timed out|Read timed out)", text)
    if host and reason:
        return f"cannot reach the apiserver at {host[1]}:{host[2]}: {reason[-1]}"
    return f"cannot reach the apiserver: {text}"
