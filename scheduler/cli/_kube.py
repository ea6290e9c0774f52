"""Connecting to the apiserver for a subcommand, with one-line errors for bad kubeconfigs.

The kubernetes client reports a missing, empty or malformed kubeconfig with its own
exceptions (and, for some shapes, a bare ``TypeError``); a person running ``explain`` or
``run`` should read which file is wrong and why, not a traceback.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from scheduler.clusterspec import read_problem, yaml_problem

if TYPE_CHECKING:
    from scheduler.kube.client import KubeClient

NOT_IN_CLUSTER = ("no --kubeconfig given and not running in a cluster (no service account "
                  "token; KUBERNETES_SERVICE_HOST is not set); pass --kubeconfig FILE")


class ConnectError(Exception):
    """The kubeconfig (or the in-cluster identity) cannot be used; the message says why."""


def connect(kubeconfig: str | None, *, pool_maxsize: int = 64) -> KubeClient:
    from kubernetes.config.config_exception import ConfigException

    from scheduler.kube import client

    where = f"--kubeconfig {kubeconfig}"
    if kubeconfig:
        path = Path(kubeconfig)
        if path.is_dir():
            raise ConnectError(f"{where}: is a directory, expected a file")
        if not path.exists():
            raise ConnectError(f"{where}: no such file")
    try:
        return client.connect(kubeconfig, pool_maxsize=pool_maxsize)
    except ConfigException as exc:
        raise ConnectError(NOT_IN_CLUSTER if not kubeconfig else
                           f"{where}: not a usable kubeconfig: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConnectError(f"{where}: {yaml_problem(exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConnectError(f"{where}: {read_problem(exc)}") from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        # the client indexes into whatever the YAML holds: a list where a mapping belongs...
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
