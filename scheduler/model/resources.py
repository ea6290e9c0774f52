"""Resource vectors and exact Kubernetes quantity parsing.

Every resource amount in the core is an integer in a canonical unit: cpu in millicores,
memory and ephemeral-storage in bytes, pods and extended resources (``nvidia.com/gpu``) in
whole units. Integers keep capacity arithmetic exact, hashable and fast; a float here would
let 0.1 + 0.2 CPUs overcommit a node.

Parsing is exact (``Decimal``), with Kubernetes' suffixes; it was ``kubernetes.utils.quantity``
once, but importing that loads the whole client (about 0.8 s of CPU at every start of the
simulator and the CLI), for a dozen lines of grammar. Quantity strings repeat endlessly in a
cluster (``"8"``, ``"16Gi"``), so results are memoised per (resource, text) in a slot
(``QUANTITIES``) of this module's own store, for the life of the process.
"""

from __future__ import annotations

import math
import re
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from scheduler.kit.memo import LARGE, Slot, Slots

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
GPU = "nvidia.com/gpu"

#: Resources whose canonical unit is the milli-unit (Kubernetes reports cpu in cores).
MILLI_RESOURCES = frozenset({CPU})


class QuantityError(ValueError):
    """A resource quantity that Kubernetes would reject, with the offending text."""


#: Kubernetes' quantity grammar: a signed decimal number, then one SI or binary suffix or a
#: decimal exponent. Checked first because ``Decimal`` alone also takes ``inf``, ``1_000``
#: and any Unicode digit.
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?",
                       re.ASCII)  # \d: 0-9 only (``scheduler.model.numerals`` says why)
#: What each suffix multiplies by: binary (``Ki`` = 2**10 ...) and decimal SI (``n`` = 10**-9 ...).
_SUFFIX: dict[str, Decimal] = {
    **{f"{s}i": Decimal(1024) ** (i + 1) for i, s in enumerate("KMGTPE")},
    **{s: Decimal(10) ** e for s, e in zip("numkMGTPE", (-9, -6, -3, 3, 6, 9, 12, 15, 18),
                                            strict=True)},
}


#: (resource, text) -> the amount: a pure function of its key. One entry per distinct text (a
#: node's allocatable memory is often its own), hence the bound.
QUANTITIES: Slot[tuple[str, str], int] = Slot("resources.parse_quantity", bound=LARGE)
_MEMO = Slots()  # the process's: a quantity means the same for as long as it runs
_QUANTITIES = _MEMO.table(QUANTITIES)
#: text -> the exact number ``exact_quantity`` reads it as: a pure function of the text.
EXACT: Slot[str, Fraction] = Slot("resources.exact_quantity", bound=LARGE)
_EXACT = _MEMO.table(EXACT)


def _parse(resource: str, text: str) -> int:
    match = _QUANTITY.fullmatch(text)
    if not match:
        raise QuantityError(f"{resource}: malformed quantity {text!r}")
    number, suffix = match.groups()
    try:
        value = Decimal(number)
        if suffix in _SUFFIX:  # before the exponent: "E" and "Ei" are suffixes
            value = value * _SUFFIX[suffix]
        elif suffix:
            value = value.scaleb(int(suffix[1:]))
    except (ValueError, InvalidOperation, OverflowError) as exc:
        raise QuantityError(f"{resource}: malformed quantity {text!r}") from exc
    if resource in MILLI_RESOURCES:
        value = value * 1000
    if value < 0:
        raise QuantityError(f"{resource}: negative quantity {text!r}")
    # Kubernetes rounds requests up to the smallest unit it can represent.
    return math.ceil(value)


def parse_quantity(value: str | int | float, resource: str) -> int:
    """Parse a quantity (``"500m"``, ``"16Gi"``, ``"1e3"``, ``8``) into *resource*'s canonical unit.

    Raises ``QuantityError`` naming the resource and the text for anything malformed or negative.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{resource}: malformed quantity {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise QuantityError(f"{resource}: negative quantity {value!r}")
        return value * 1000 if resource in MILLI_RESOURCES else value
    text = str(value).strip()
    if not text:
        raise QuantityError(f"{resource}: empty quantity")
    key = (resource, text)
    amount = _QUANTITIES.get(key)
    if amount is None:  # (a malformed one raises, and is not kept)
        amount = _MEMO.put(QUANTITIES, key, _parse(resource, text))
    return amount


def exact_quantity(text: str) -> Fraction:
    """A quantity as an exact, signed number (``"40Gi"``, ``"500m"``, ``"-1"``, ``"1e3"``).

    For values compared rather than counted in a unit (a device's capacity, CEL's
    ``quantity()``): no rounding, no canonical unit. ``QuantityError`` names the text when
    Kubernetes' grammar refuses it. Kept per text (``EXACT``) like ``parse_quantity``."""
    value = _EXACT.get(text) if isinstance(text, str) else None
    if value is None:  # (a malformed one raises, and is not kept)
        value = _MEMO.put(EXACT, text, _exact(text))
    return value


def _exact(text: str) -> Fraction:
    match = _QUANTITY.fullmatch(text.strip()) if isinstance(text, str) else None
    if not match:
        raise QuantityError(f"malformed quantity {text!r}")
    number, suffix = match.groups()
    value = Fraction(Decimal(number))
    if suffix in _SUFFIX:
        return value * Fraction(_SUFFIX[suffix])
    if suffix:
        exponent = int(suffix[1:])
        if abs(exponent) > 64:  # beyond any quantity Kubernetes stores; refused, not computed
            raise QuantityError(f"quantity out of range {text!r}")
        return value * (Fraction(10) ** exponent)
    return value


def format_amount(resource: str, amount: int) -> str:
    """Render a canonical amount for people (``"1500m"``, ``"16Gi"``, ``"8"``)."""
    if resource in MILLI_RESOURCES:
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if resource in (MEMORY, EPHEMERAL_STORAGE):
        for suffix, factor in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if amount >= factor and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


class Resources(Mapping[str, int]):
    """An immutable, hashable vector of named resource amounts (absent names are zero).

    A ``Mapping`` rather than a dataclass so that ``res["memory"]`` and ``dict(res)`` work;
    zero entries are dropped so that equal vectors compare and hash equal. GPUs are read
    through ``scheduler.model.demand.gpus_of`` (a GPU may also come from a device claim,
    which a vector of requests does not show).
    """

    __slots__ = ("_amounts", "_hash")

    def __init__(self, amounts: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        items = (amounts.items() if type(amounts) is dict or isinstance(amounts, Mapping)
                 else amounts)
        self._amounts: dict[str, int] = {k: int(v) for k, v in items if v}
        self._hash: int | None = None

    @classmethod
    def _of_ints(cls, amounts: dict[str, int]) -> Resources:
        """Take ownership of *amounts* (int values) without copying; zeros are dropped.

        The hot-path constructor for arithmetic inside this module, which already has ints.
        """
        res = cls.__new__(cls)
        if 0 in amounts.values():
            amounts = {k: v for k, v in amounts.items() if v}
        res._amounts = amounts
        res._hash = None
        return res

    @classmethod
    def of(cls, **amounts: int) -> Resources:
        """Build from keyword arguments; ``gpu=`` is shorthand for ``nvidia.com/gpu``."""
        return cls({(GPU if k == "gpu" else k.replace("_", "-")): v for k, v in amounts.items()})

    @classmethod
    def parse(cls, quantities: Mapping[str, str | int | float]) -> Resources:
        """Parse a Kubernetes ``resources.requests``-style mapping of quantity strings."""
        return cls({name: parse_quantity(q, name) for name, q in quantities.items()})

    # Mapping protocol -------------------------------------------------------------------
    def __getitem__(self, name: str) -> int:
        return self._amounts.get(name, 0)

    def __iter__(self) -> Iterator[str]:
        return iter(self._amounts)

    def __len__(self) -> int:
        return len(self._amounts)

    def __contains__(self, name: object) -> bool:
        return name in self._amounts

    def get(self, name: str, default: int = 0) -> int:  # type: ignore[override]
        return self._amounts.get(name, default)

    # The dict's own views: much cheaper than ``Mapping``'s generic ones on hot paths.
    def items(self) -> ItemsView[str, int]:
        return self._amounts.items()

    def keys(self) -> KeysView[str]:
        return self._amounts.keys()

    def values(self) -> ValuesView[int]:
        return self._amounts.values()

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, Resources):
            return self._amounts == other._amounts
        if isinstance(other, Mapping):
            return self._amounts == {k: v for k, v in other.items() if v}
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._amounts.items()))
        return self._hash

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={format_amount(k, v)}" for k, v in sorted(self._amounts.items()))
        return f"Resources({inner})"

    # Arithmetic ---------------------------------------------------------------------------
    def __add__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._amounts)
        get = out.get
        for k, v in other.items():
            out[k] = get(k, 0) + v
        return Resources._of_ints(out) if isinstance(other, Resources) else Resources(out)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._amounts)
        get = out.get
        for k, v in other.items():
            out[k] = get(k, 0) - v
        return Resources._of_ints(out) if isinstance(other, Resources) else Resources(out)

    def __mul__(self, factor: int) -> Resources:
        if factor == 1:
            return self
        if type(factor) is not int:
            return Resources({k: v * factor for k, v in self._amounts.items()})
        return Resources._of_ints({k: v * factor for k, v in self._amounts.items()})

    __rmul__ = __mul__

    def fits_in(self, capacity: Mapping[str, int]) -> bool:
        """True when every amount here is at most the same amount in *capacity*."""
        get = capacity._amounts.get if type(capacity) is Resources else capacity.get
        for k, v in self._amounts.items():  # noqa: SIM110 (a loop: no generator per call)
            if v > get(k, 0):
                return False
        return True

    def copies_in(self, capacity: Mapping[str, int]) -> int:
        """How many copies of this request fit in *capacity* (a large number if it asks nothing).

        The innermost call of placement (once per role and candidate node, hundreds of
        thousands a cycle): the minimum is kept with a comparison, not ``min()``, whose call
        cost more than the division it compares."""
        best = 1 << 30
        get = capacity._amounts.get if type(capacity) is Resources else capacity.get
        for k, v in self._amounts.items():
            if v > 0:
                have = get(k, 0)
                if have < v:
                    return 0
                fit = have // v
                if fit < best:
                    best = fit
        return best

    def max_with(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._amounts)
        for k, v in other.items():
            if v > out.get(k, 0):
                out[k] = v
        return Resources(out)

    def clamp_nonnegative(self) -> Resources:
        if all(v > 0 for v in self._amounts.values()):
            return self
        return Resources._of_ints({k: v for k, v in self._amounts.items() if v > 0})

    def is_nonnegative(self) -> bool:
        return all(v >= 0 for v in self._amounts.values())

    def shortfall(self, capacity: Mapping[str, int]) -> Resources:
        """The amounts by which this request exceeds *capacity* (empty when it fits)."""
        get = capacity._amounts.get if type(capacity) is Resources else capacity.get
        return Resources._of_ints(
            {k: v - get(k, 0) for k, v in self._amounts.items() if v > get(k, 0)})

    def to_dict(self) -> dict[str, int]:
        return dict(self._amounts)

    def describe(self) -> str:
        """Human text: ``8 nvidia.com/gpu, 32 cpu, 256Gi memory``."""
        parts = (f"{format_amount(k, v)} {k}" for k, v in sorted(self._amounts.items()))
        return ", ".join(parts) or "nothing"


EMPTY = Resources()


def total(vectors: Iterable[Mapping[str, int]]) -> Resources:
    """Sum of many vectors in one pass (cheaper than chained ``+``)."""
    out: dict[str, int] = {}
    get = out.get
    exact = True
    for vec in vectors:
        if type(vec) is not Resources:
            exact = False
        for k, v in vec.items():
            out[k] = get(k, 0) + v
    return Resources._of_ints(out) if exact else Resources(out)
