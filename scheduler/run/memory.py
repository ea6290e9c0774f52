"""Garbage-collector settings for a process that keeps a whole cluster in memory.

Why: the cyclic collector's full passes walk every live container object. While the informers
decode the first lists (tens of megabytes of JSON: millions of dicts and strings), CPython's
default thresholds run such passes again and again over a heap that only grows, which measured
four times the cost of the decoding itself (10,000 kwok pods: ``json.loads`` 1.6 s of CPU with
the collector on, 0.37 s with it off). Nothing decoded then is garbage: it is the cache. So
the collector waits during the initial sync, and what survived it is moved out of the
collector's sight (``gc.freeze``); reference counting still frees any of it that is replaced
later, and later garbage is collected as usual.
"""

from __future__ import annotations

import gc


def pause() -> None:
    """No cyclic collection until ``settle``: call before the initial lists."""
    gc.disable()


def settle() -> None:
    """Freeze what is alive (the synced cache) and collect as usual from here on."""
    gc.freeze()
    gc.enable()
