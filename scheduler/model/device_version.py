"""Device attribute values that need more than a Python scalar: semantic versions, and the
equality ``matchAttribute`` asks of two attribute values.

Apart from ``scheduler.model.devices`` (which re-exports both) so that module stays the
catalogue of device values while the version rules live in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering

_SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?")


@total_ordering
@dataclass(frozen=True, slots=True)
class Version:
    """A semantic version (semver.org 2.0.0), ordered by precedence.

    Equality and order ignore build metadata, as semver precedence does; ``text`` keeps what
    the driver wrote (``matchAttribute`` compares that text, as kube-scheduler does)."""

    text: str
    core: tuple[int, int, int] = field(init=False, compare=False)
    pre: tuple[str, ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        match = _SEMVER.fullmatch(self.text)
        if match is None:
            raise ValueError(f"not a semantic version: {self.text!r}")
        major, minor, patch, pre, _ = match.groups()
        object.__setattr__(self, "core", (int(major), int(minor), int(patch)))
        object.__setattr__(self, "pre", tuple(pre.split(".")) if pre else ())

    def _key(self) -> tuple[tuple[int, int, int], int, tuple[tuple[int, int, str], ...]]:
        # A release ranks above its pre-releases; numeric identifiers below alphanumeric ones.
        ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return self.core, 0 if self.pre else 1, ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: Version) -> bool:
        return self._key() < other._key()


#: A device attribute's value, typed as Kubernetes types it (``int`` is int64).
AttributeValue = int | bool | str | Version


def same_value(a: AttributeValue, b: AttributeValue) -> bool:
    """Equal and of the same type (``True`` is not ``1``), versions by their text: what
    ``matchAttribute`` asks of two devices."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Version) and isinstance(b, Version):
        return a.text == b.text
    return a == b
