"""The `gang-scheduler` console script.

Each subcommand lives in its own module exposing ``register(subparsers)``; a subcommand is
listed here only once it works, so `--help` never advertises something that does not exist.
Modules are imported lazily by name so that `gang-scheduler --help` stays fast and a broken
optional dependency in one subcommand cannot take down the others.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from importlib import metadata

# (module under scheduler.cli, one-line summary shown before the module is imported)
SUBCOMMANDS: tuple[str, ...] = ("run", "explain", "views", "dev_cluster", "policy", "simulate",
                                 "packing", "demo", "checkpoint", "chargeback")

DESCRIPTION = """\
gang-scheduler: all-or-nothing scheduling of GPU training gangs on Kubernetes.

Pods that set `schedulerName: gang-scheduler` are placed as whole gangs or not at all,
under queue quotas, fair share, preemption, reservations and backfill.
"""


def build_parser(prog: str = "gang-scheduler",
                 modules: tuple[str, ...] = SUBCOMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}",
                        help="print the installed version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        module = importlib.import_module(f"scheduler.cli.{name}")
        module.register(sub)
    return parser


def version() -> str:
    """The installed distribution's version (pyproject.toml), or why it is unknown."""
    try:
        return metadata.version("gang-scheduler")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed: pip install -e .)"


def main(argv: Sequence[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    try:
        try:
            parser = parser or build_parser()
            args = parser.parse_args(argv)
            if not getattr(args, "handler", None):
                parser.print_help()
                return 2
            code = int(args.handler(args) or 0)
        finally:  # --help and --version leave through SystemExit, their text still buffered
            sys.stdout.flush()
    except BrokenPipeError:
        return closed_pipe()
    return code


#: What a shell reports for a program that a closed pipe stopped (128 + SIGPIPE), as for
#: ``git log | head``.
CLOSED_PIPE_EXIT_CODE = 141


def closed_pipe() -> int:
    """The reader of stdout went away (``gang-scheduler gangs | head``): stop quietly, not with
    a BrokenPipeError traceback. Python ignores SIGPIPE, so the write raised instead of the
    process dying as other programs do; whatever is still buffered goes to /dev/null, or the
    interpreter's own flush at exit would raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return CLOSED_PIPE_EXIT_CODE


if __name__ == "__main__":
    sys.exit(main())
