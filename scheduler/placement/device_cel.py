"""Device selectors: the CEL expressions of DeviceClasses and requests, as kube-scheduler's
DRA allocator evaluates them.

An expression sees one variable, ``device``: ``device.driver``, ``device.attributes[domain]
[id]`` (int, bool, string or semantic version) and ``device.capacity[domain][id]`` (a
quantity). Kubernetes' CEL extensions used by selectors in practice are here: ``quantity()``
/ ``isQuantity()`` with ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``asInteger``,
``isInteger``, ``asApproximateFloat``, ``sign``, ``add``, ``sub``; ``semver()`` /
``isSemver()`` with ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``major``, ``minor``,
``patch``; and cel-go's string extension (``lowerAscii``, ``split``, ``substring``...).

Why ``common-expression-language`` (the Rust CEL, ``cel``): it compiles once and evaluates a
program in about 20 µs, against several hundred for the pure-Python ``cel-python``
interpreter (whose compiled runner keeps its state in module globals and logs every runtime
error). It carries only CEL's own values through custom functions, so a quantity or a version
travels as a one-entry map tagged by its kind holding a canonical text: maps compare by
value, so ``==`` between two quantities or two versions means what it means in Kubernetes
(``1Gi == 1024Mi``; versions ignore build metadata). Expressions stored in the apiserver
were type-checked there, so the odd things a map allows that a Quantity does not (``size(q)``)
never reach us.

``device.attributes[d]`` of a domain the device lacks is an empty map in Kubernetes (so
``"x" in device.attributes["d"]`` is false, not an error): every domain the expression names
as a string literal is given one. (Iterating over the domains themselves would see those
empty ones; no selector we know of does.) ``cel.bind(x, init, body)``, the one cel-go macro
Kubernetes enables for selectors, is missing from this library: it is rewritten before
compiling to ``[init].map(x, body)[0]``, which binds and evaluates the same (``expand_bind``).

Errors follow kube-scheduler: a selector that does not compile, or fails at evaluation (a
missing attribute, a type mismatch, a result that is not a bool), is no match *and* an error
that stops the allocation; ``SelectorError`` carries the words, the caller adds whose selector
it was.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from scheduler.model.devices import Device, Version
from scheduler.model.resources import QuantityError, exact_quantity

if TYPE_CHECKING:
    import cel

# ``cel`` is imported where first used: its package imports its command line (typer,
# prompt_toolkit, pydantic, rich), a few hundred milliseconds of every scheduler's start-up
# that a cluster without device selectors never needs.

_Q = "__k8s_quantity__"
_V = "__k8s_semver__"
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: String literals of an expression (both quote styles, escapes kept): the domains it may name.
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')


class SelectorError(Exception):
    """A selector that does not compile, or fails evaluating for one device."""


# Quantities and versions as CEL values ------------------------------------------------------
def _quantity_value(q: Fraction) -> dict[str, str]:
    return {_Q: str(q)}


def _version_value(v: Version) -> dict[str, str]:
    return {_V: v.text.split("+", 1)[0]}  # build metadata does not take part in equality


def _as_quantity(value: Any, what: str) -> Fraction:
    if isinstance(value, Mapping) and _Q in value:
        return Fraction(value[_Q])
    if isinstance(value, int) and not isinstance(value, bool) and what == "operand":
        return Fraction(value)
    raise ValueError(f"{what}: expected a quantity, got {value!r}")


def _as_version(value: Any) -> Version:
    if isinstance(value, Mapping) and _V in value:
        return Version(value[_V])
    raise ValueError(f"expected a semver, got {value!r}")


def _kind(value: Any) -> str:
    return _Q if isinstance(value, Mapping) and _Q in value else _V


def _compare(a: Any, b: Any) -> int:
    if _kind(a) == _Q:
        x, y = _as_quantity(a, "receiver"), _as_quantity(b, "argument")
        return (x > y) - (x < y)
    v, w = _as_version(a), _as_version(b)
    return (w < v) - (v < w)


def _quantity(text: Any) -> dict[str, str]:
    try:
        return _quantity_value(exact_quantity(str(text)))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


def _is_quantity(text: Any) -> bool:
    try:
        exact_quantity(str(text))
    except QuantityError:
        return False
    return True


def _semver(text: Any) -> dict[str, str]:
    return _version_value(Version(str(text)))


def _is_semver(text: Any) -> bool:
    try:
        Version(str(text))
    except ValueError:
        return False
    return True


def _as_integer(q: Any) -> int:
    x = _as_quantity(q, "receiver")
    if x.denominator != 1 or not _INT64[0] <= x.numerator <= _INT64[1]:
        raise ValueError(f"cannot convert quantity {x} to an int64")
    return x.numerator


def _is_integer(q: Any) -> bool:
    x = _as_quantity(q, "receiver")
    return x.denominator == 1 and _INT64[0] <= x.numerator <= _INT64[1]


def _sign(q: Any) -> int:
    x = _as_quantity(q, "receiver")
    return (x > 0) - (x < 0)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "asInteger": _as_integer,
    "isInteger": _is_integer,
    "asApproximateFloat": lambda q: float(_as_quantity(q, "receiver")),
    "sign": _sign,
    "add": lambda a, b: _quantity_value(_as_quantity(a, "receiver")
                                        + _as_quantity(b, "operand")),
    "sub": lambda a, b: _quantity_value(_as_quantity(a, "receiver")
                                        - _as_quantity(b, "operand")),
    "major": lambda v: _as_version(v).core[0],
    "minor": lambda v: _as_version(v).core[1],
    "patch": lambda v: _as_version(v).core[2],
}

_local = threading.local()  # a cel.Context is not thread-safe: one per thread


class _OwnFailures(logging.Filter):
    """Drops the library's warning when one of *our* functions refuses its input (a
    malformed ``quantity("x")``): that failure is the selector's error, reported with the
    claim's reason; a warning beside it would repeat it in the log of the live scheduler."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not any(text.startswith(f"Python function '{name}' failed")
                       for name in _FUNCTIONS)


logging.getLogger("cel").addFilter(_OwnFailures())


def _context() -> cel.Context:
    ctx = getattr(_local, "context", None)
    if ctx is None:
        import cel
        from cel import stdlib as cel_stdlib

        ctx = cel.Context()
        cel_stdlib.add_stdlib_to_context(ctx, extensions=["strings"])
        for name, fn in _FUNCTIONS.items():
            ctx.add_function(name, fn)
        _local.context = ctx
    return ctx


# cel.bind -------------------------------------------------------------------------------
_BIND = re.compile(r"(?<![\w.])cel\s*\.\s*bind\s*\(")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPEN, _CLOSE = "([{", ")]}"


def _code_mask(text: str) -> list[bool]:
    """Per character: is it code (not inside a string literal)?"""
    mask, quote, i = [True] * len(text), "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            mask[i] = False
            if ch == "\\":
                if i + 1 < len(text):
                    mask[i + 1] = False
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote, mask[i] = ch, False
        i += 1
    return mask


def _arguments(text: str, start: int, mask: list[bool]) -> tuple[list[str], int] | None:
    """The comma-separated arguments from *start* (just after ``(``) to the matching ``)``,
    and the index after it; None if unbalanced."""
    depth, args, begin = 0, [], start
    for i in range(start, len(text)):
        if not mask[i]:
            continue
        ch = text[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            if depth == 0:
                args.append(text[begin:i])
                return args, i + 1
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(text[begin:i])
            begin = i + 1
    return None


def expand_bind(expression: str) -> str:
    """*expression* with every ``cel.bind(x, init, body)`` as ``[init].map(x, body)[0]``
    (nested ones too); a malformed one is left for the compiler to refuse."""
    mask = _code_mask(expression)
    for m in _BIND.finditer(expression):
        if not mask[m.start()]:
            continue
        found = _arguments(expression, m.end(), mask)
        if found is None or len(found[0]) != 3 or not _IDENT.fullmatch(found[0][0].strip()):
            return expression
        (var, init, body), end = found
        return (expression[:m.start()]
                + f"[{expand_bind(init.strip())}].map({var.strip()}, "
                  f"{expand_bind(body.strip())})[0]"
                + expand_bind(expression[end:]))
    return expression


# Compiling and evaluating ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Compiled:
    """One expression compiled (or why it does not compile), and the domains it names."""

    expression: str
    program: Any = None
    error: str = ""
    literals: frozenset[str] = frozenset()


@lru_cache(maxsize=1024)
def compile_selector(expression: str) -> Compiled:
    """Compile *expression* once (memoised by its text: a cluster has a handful of
    selectors, used by every request and class that repeats them)."""
    literals = frozenset(a or b for a, b in _LITERAL.findall(expression))
    if not expression.strip():
        return Compiled(expression, error="empty expression", literals=literals)
    import cel

    try:
        program = cel.compile(expand_bind(expression))
    except Exception as exc:  # the library raises ValueError, or worse on odd input
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Compiled(expression, error=f"CEL compile error: {first}", literals=literals)
    return Compiled(expression, program=program, literals=literals)


def _domains(pairs: tuple[tuple[str, Any], ...], driver: str,
             convert: Callable[[Any], Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, value in pairs:
        domain, _, ident = name.rpartition("/")
        out.setdefault(domain or driver, {})[ident] = convert(value)
    return out


def _attribute(value: Any) -> Any:
    return _version_value(value) if isinstance(value, Version) else value


@lru_cache(maxsize=16384)
def _variables(driver: str, device: Device) -> tuple[dict[str, Any], dict[str, Any]]:
    return (_domains(device.attributes, driver, _attribute),
            _domains(device.capacity, driver, _quantity_value))


def evaluate(compiled: Compiled, driver: str, device: Device) -> bool:
    """Does *device* (of *driver*) satisfy the selector? ``SelectorError`` if it does not
    compile or fails for this device."""
    if compiled.error:
        raise SelectorError(compiled.error)
    attributes, capacity = _variables(driver, device)
    missing = compiled.literals - attributes.keys() - capacity.keys()
    if missing:  # a named domain the device lacks reads as an empty map, as in Kubernetes
        attributes = {**attributes, **{key: {} for key in missing}}
        capacity = {**capacity, **{key: {} for key in missing}}
    ctx = _context()
    ctx.add_variable("device", {"driver": driver, "attributes": attributes,
                                "capacity": capacity})
    try:
        result = compiled.program.execute(ctx)
    except KeyError as exc:  # the library's word for a missing map key
        raise SelectorError(f"CEL runtime error: no such key: {exc.args[0]}") from None
    except Exception as exc:  # any failure of the expression is the selector's error
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SelectorError(f"CEL runtime error: {text}") from None
    if not isinstance(result, bool):
        raise SelectorError(f"CEL result is {type(result).__name__}, not bool")
    return result


@lru_cache(maxsize=65536)
def matches(expression: str, driver: str, device: Device) -> bool | str:
    """``evaluate`` memoised per (expression, device): True/False, or the error's words.

    Devices are values, so the answer holds for as long as the device is published
    unchanged, across requests, claims and cycles."""
    try:
        return evaluate(compile_selector(expression), driver, device)
    except SelectorError as exc:
        return str(exc)
