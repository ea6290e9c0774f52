"""`kubectl gang ...`: the read-only commands as a kubectl plugin (the `kubectl-gang` script).

kubectl runs any `kubectl-NAME` on PATH for `kubectl NAME`; this one offers the views and
`explain` (`kubectl gang queues`, `kubectl gang gangs -n team-a`, `kubectl gang explain
team-a/llama`) with the same flags. kubectl passes no kubeconfig to a plugin: the views read
$KUBECONFIG or ~/.kube/config unless `--kubeconfig` is given.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from scheduler.cli import main as cli

PLUGIN_COMMANDS = ("views", "explain")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    given = any(a == "--kubeconfig" or a.startswith("--kubeconfig=") for a in args)
    default = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or \
        str(Path.home() / ".kube" / "config")
    if args and not args[0].startswith("-") and not given and Path(default).is_file():
        args += ["--kubeconfig", default]  # every plugin command takes it
    return cli.main(args, cli.build_parser(prog="kubectl gang", modules=PLUGIN_COMMANDS))


if __name__ == "__main__":
    sys.exit(main())
