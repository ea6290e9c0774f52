"""Policy errors that name the object, the field path and the reason.

Validation never stops at the first problem: an administrator fixing a file wants the whole
list at once, and the live scheduler puts it in a status condition. Hence a value type for one
error and an exception that carries all of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """``team-a: spec.quotas[0].nominal.nvidia.com/gpu: must be >= 0, got -1``."""

    obj: str  # object name, or "<kind #n>" when the object has no usable name
    path: str  # field path inside the object ("" for the object as a whole)
    reason: str
    source: str = ""  # file and document index, when read from a file

    def __str__(self) -> str:
        where = f"{self.obj}: {self.path}" if self.path else self.obj
        text = f"{where}: {self.reason}"
        return f"{self.source}: {text}" if self.source else text


class PolicyError(ValueError):
    """One or more invalid policy objects; ``errors`` lists every problem found."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors = tuple(errors)
        super().__init__("\n".join(str(e) for e in self.errors) or "invalid policy")
