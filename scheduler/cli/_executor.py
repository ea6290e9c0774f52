"""``--ray-address``: the flag every sweeping command shares, and the executor it selects.

Without the flag a sweep's runs go to local processes, as they always did; with it, to the
Ray cluster there (``simulator.executors``). The flag is checked before any input is read:
Ray missing, a malformed address or nothing listening there is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.executors import Executor

HELP = ("run the sweep's runs on the Ray cluster whose head is at ADDR (HOST:PORT, e.g. "
        "10.0.0.5:6379 as `ray start --head` prints it, or ray://HOST:10001 for Ray Client); "
        "'env' takes the address from $RAY_ADDRESS, which is otherwise ignored. Needs the "
        "extra: pip install 'gang-scheduler[ray]'. The results are the same as on local "
        "processes (default: local processes)")


def add_ray_address(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ray-address", metavar="ADDR", help=HELP)


def executor(args: argparse.Namespace, processes: int) -> Executor:
    """The executor the flags select; raises ``simulator.executors.ExecutorError`` naming
    the flag when Ray is asked for and cannot be used."""
    from simulator.executors import executor_for

    return executor_for(processes, args.ray_address)
