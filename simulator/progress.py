"""One progress bar for every long simulator task (a trace replay, a sweep), so they all look
the same and can all be silenced the same way (``enabled=False`` in tests and scripts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


@contextmanager
def progress_bar(
    description: str, total: float, *, enabled: bool = True, console: Console | None = None
) -> Iterator[Callable[[float], None]]:
    """Yield ``advance(amount)``; the bar shows done/total, elapsed and remaining time.

    Disabled, it yields a no-op so callers never branch on whether a bar is shown.
    """
    if not enabled:
        yield lambda amount: None
        return
    columns = (
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda amount: bar.advance(task, amount)
