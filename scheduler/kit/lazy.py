"""``lazy``: a per-instance value worked out on first read, without a lock.

``functools.cached_property`` takes a lock on every first read in Python 3.11, which cost
more than the values themselves on the millions of gang turns a simulation makes (py-spy of
the default ``simulate``). ``lazy`` works the value out on first read and keeps it in the
instance's ``__dict__``, which later reads find before the descriptor (it defines no
``__set__``). For objects that live within one thread, such as a cycle's ``Trial``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

_T = TypeVar("_T")


class lazy(Generic[_T]):
    """See the module docstring."""

    def __init__(self, fn: Callable[[Any], _T]) -> None:
        self.fn, self.name = fn, fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj: Any, owner: Any = None) -> _T:
        value = obj.__dict__[self.name] = self.fn(obj)
        return value
