"""Run a module under a wall-clock sampler of every thread's stack; write the busiest functions
at exit.

Why: py-spy is not installed here and cProfile sees only the thread that enabled it, while the
scheduler's start-up happens on its informer threads. Every 5 ms this records each thread's
innermost frame ("leaf") and every function on its stack ("cumulative"), skipping threads
whose innermost Python frame is a known wait (a lock, a queue, a socket read), and writes the
top entries to ``$SAMPLE_OUT`` when the process exits (SIGTERM included, when the program
exits normally on it as ``gang-scheduler run`` does).

    SAMPLE_OUT=/tmp/stacks.txt python benchmarks/sample_stacks.py -m scheduler.cli.main run ...
"""

from __future__ import annotations

import atexit
import collections
import os
import runpy
import sys
import threading
import time
from types import FrameType

#: Innermost Python frames of a thread that is waiting, not working.
WAITS = frozenset({"wait", "select", "poll", "_wait_for_tstate_lock", "readinto", "accept",
                   "sleep", "serve_forever", "recv_into", "_recv", "recv", "_worker", "get",
                   "do_poll", "_run", "read"})
leaf: collections.Counter[str] = collections.Counter()
cumulative: collections.Counter[str] = collections.Counter()
threads: collections.Counter[str] = collections.Counter()
stop = threading.Event()


def sample() -> None:
    me = threading.get_ident()
    while not stop.is_set():
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me or frame.f_code.co_name in WAITS:
                continue
            stack = []
            f: FrameType | None = frame
            while f is not None:
                code = f.f_code
                stack.append(f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}:"
                             f"{code.co_name}")
                f = f.f_back
            threads[names.get(ident, str(ident)).split("_")[0]] += 1
            leaf[stack[0]] += 1
            cumulative.update(set(stack))
        time.sleep(0.005)


def dump() -> None:
    stop.set()
    with open(os.environ["SAMPLE_OUT"], "w") as out:
        out.write(f"busy samples {sum(threads.values())} by thread: "
                  f"{dict(threads.most_common(8))}\n== leaf\n")
        out.writelines(f"{v:6d} {k}\n" for k, v in leaf.most_common(30))
        out.write("== cumulative\n")
        out.writelines(f"{v:6d} {k}\n" for k, v in cumulative.most_common(60))


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "-m":
        sys.exit("usage: SAMPLE_OUT=FILE sample_stacks.py -m MODULE [ARGS...]")
    atexit.register(dump)
    threading.Thread(target=sample, name="sampler", daemon=True).start()
    sys.argv = sys.argv[2:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
