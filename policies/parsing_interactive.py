"""``spec.interactive`` of a Queue: per-user caps on its interactive gangs, parsed apart from
``parsing`` so the field's checks sit beside each other (``policies.interactive`` has the
rules).

Pure and total like ``parsing``: bad input gives a ``FieldError`` naming the field path and
the reason; the queue is then refused as a whole (live: ``Valid=False``, the last valid
version kept).
"""

from __future__ import annotations

import re
from typing import Any

from policies.interactive import NO_CAPS, InteractivePolicy
from policies.parsing_checks import ObjectErrors
from scheduler.model.workloads import USER_LABEL

INTERACTIVE_FIELDS = {"maxGPUsPerUser", "maxGangsPerUser", "userLabel"}
#: The most GPUs or gangs a per-user cap may name (beyond this it is a typo).
MAX_CAP = 1_000_000
#: A label key: an optional DNS-subdomain prefix and a name of at most 63 characters.
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def parse_interactive(raw: Any, err: ObjectErrors) -> InteractivePolicy:
    """``spec.interactive`` (absent: interactive gangs allowed, no per-user cap)."""
    if raw is None:
        return NO_CAPS
    path = "spec.interactive"
    m = err.mapping(raw, path)
    err.unknown(m, path, INTERACTIVE_FIELDS)
    label = m.get("userLabel", USER_LABEL)
    if not isinstance(label, str) or not _LABEL_KEY.match(label):
        err.add(f"{path}.userLabel", f"must be a label key such as {USER_LABEL}, got {label!r}")
        label = USER_LABEL
    return InteractivePolicy(
        max_gpus_per_user=_cap(m.get("maxGPUsPerUser"), f"{path}.maxGPUsPerUser", err, 0),
        max_gangs_per_user=_cap(m.get("maxGangsPerUser"), f"{path}.maxGangsPerUser", err, 1),
        user_label=label)


def _cap(raw: Any, path: str, err: ObjectErrors, least: int) -> int | None:
    """A whole number from *least* to ``MAX_CAP`` (0 GPUs: CPU-only sessions; 0 gangs would
    forbid interactive work in the queue: leave the label off instead)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not least <= raw <= MAX_CAP:
        err.add(path, f"must be a whole number from {least} to {MAX_CAP}, got {raw!r}")
        return None
    return raw
