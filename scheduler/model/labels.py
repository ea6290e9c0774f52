"""Labels and label selectors as Kubernetes evaluates them (``metav1.LabelSelector``).

Why a type of our own: pod affinity, topology spread and PV claim selectors are matched
thousands of times per solve against the labels of running pods, so labels are an
immutable, hashable mapping (a role's labels are part of its identity) and a selector is a
tuple of requirements that matches without building anything.

Kubernetes' two edge cases are kept apart on purpose: a *nil* selector matches nothing
(``NOTHING``), an *empty* one (``{}``) matches everything (``EVERYTHING``); topology spread
counts no pods for an empty selector although the incoming pod matches it.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass
from enum import StrEnum


class Labels(Mapping[str, str]):
    """An immutable, hashable ``str -> str`` mapping."""

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._data: dict[str, str] = dict(sorted(dict(data).items()))
        self._hash = hash(tuple(self._data.items()))

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self._data.get(key, default)

    def items(self) -> ItemsView[str, str]:
        return self._data.items()

    def keys(self) -> KeysView[str]:
        return self._data.keys()

    def values(self) -> ValuesView[str]:
        return self._data.values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Labels):
            return self._hash == other._hash and self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Labels({self._data!r})"

    def text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self._data.items())


NO_LABELS = Labels()


class LabelOp(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    op: LabelOp
    values: tuple[str, ...] = ()  # sorted, unique

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op is LabelOp.IN:
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op is LabelOp.NOT_IN:
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op is LabelOp.EXISTS:
            return self.key in labels
        return self.key not in labels

    def describe(self) -> str:
        if self.op is LabelOp.IN and len(self.values) == 1:
            return f"{self.key}={self.values[0]}"
        if self.op is LabelOp.NOT_IN and len(self.values) == 1:
            return f"{self.key}!={self.values[0]}"
        if self.op is LabelOp.EXISTS:
            return self.key
        if self.op is LabelOp.DOES_NOT_EXIST:
            return f"!{self.key}"
        word = "in" if self.op is LabelOp.IN else "notin"
        return f"{self.key} {word} ({','.join(self.values)})"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Requirements that must all be met; ``nothing`` for a nil selector."""

    requirements: tuple[LabelRequirement, ...] = ()  # sorted by (key, op, values)
    nothing: bool = False

    @classmethod
    def of(cls, requirements: Iterable[LabelRequirement]) -> LabelSelector:
        unique = sorted(set(requirements), key=lambda r: (r.key, r.op, r.values))
        return cls(tuple(unique))

    @classmethod
    def equals(cls, pairs: Mapping[str, str]) -> LabelSelector:
        return cls.of(LabelRequirement(k, LabelOp.IN, (v,)) for k, v in pairs.items())

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """``{}``: matches every pod (but topology spread counts none with it)."""
        return not self.nothing and not self.requirements

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.requirements)

    def with_requirements(self, extra: Iterable[LabelRequirement]) -> LabelSelector:
        """This selector AND *extra* (``matchLabelKeys`` merging); nil stays nil."""
        if self.nothing:
            return self
        return LabelSelector.of((*self.requirements, *extra))

    def index_keys(self) -> tuple[tuple[str, str], ...] | None:
        """(key, value) pairs one of which every matching pod carries, for an inverted
        index lookup; None when the selector must be checked against every pod."""
        best: tuple[tuple[str, str], ...] | None = None
        for r in self.requirements:
            if r.op is LabelOp.IN and (best is None or len(r.values) < len(best)):
                best = tuple((r.key, v) for v in r.values)
        return best

    def describe(self) -> str:
        if self.nothing:
            return "<none>"
        return ",".join(r.describe() for r in self.requirements) or "<all>"


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)
