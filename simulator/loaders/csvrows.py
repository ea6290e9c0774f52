"""Reading trace CSVs with the line numbers and column names that errors must carry.

Why not `csv.DictReader`: building a dict per row costs more than parsing the row, and the
82k-row Philly trace must load in well under two seconds. Rows come out as lists with a column
index map; `reader.line_num` gives the physical 1-based line (the header is line 1), so an error
points at the line a person opens in an editor even when a quoted field spans lines.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from simulator.trace import TraceError


def read_header(path: Path) -> list[str]:
    """The first row of a CSV file that is not blank or a comment, stripped; [] if none."""
    with _reading(path), path.open(newline="", encoding="utf-8") as handle:
        for row in csv.reader(handle):
            if not _skippable(row):
                return [cell.strip() for cell in row]
    return []


@contextmanager
def _reading(path: Path, where: Callable[[], int | None] = lambda: None) -> Iterator[None]:
    """Turn undecodable bytes and CSV syntax errors into a `TraceError` naming file and line."""
    try:
        yield
    except UnicodeDecodeError as exc:
        # No line: the file is decoded in chunks, ahead of the row being parsed.
        raise TraceError(str(path), None, "", f"not UTF-8 text (byte "
                         f"0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    except csv.Error as exc:
        raise TraceError(str(path), where(), "", f"not a readable CSV: {exc}") from None


def _skippable(cells: list[str]) -> bool:
    """Blank lines and ``#`` comment lines, which hand-written traces use for notes."""
    return not cells or not "".join(cells).strip() or cells[0].lstrip().startswith("#")


def iter_rows(
    path: Path, required: Sequence[str], optional: Sequence[str] = ()
) -> Iterator[tuple[dict[str, int], int, list[str]]]:
    """Yield ``(column index map, line number, cells)`` for every data row.

    Blank lines and lines starting with ``#`` are skipped, before and after the header.

    The header must contain every *required* column; *optional* ones may be absent (they are
    then missing from the index map). Unknown extra columns are ignored. A row with a different
    number of cells than the header is rejected.
    """
    name = str(path)
    if not path.is_file():
        raise TraceError(name, None, "", "is a directory, expected a trace file"
                         if path.is_dir() else "no such file")
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        with _reading(path, lambda: reader.line_num + 1):
            header = next((row for row in reader if not _skippable(row)), None)
            if header is None:
                raise TraceError(name, None, "", "empty file, expected a header row")
            header = [cell.strip() for cell in header]
            index = {col: i for i, col in enumerate(header)}
            for col in required:
                if col not in index:
                    raise TraceError(
                        name, reader.line_num, col, f"missing column (header: {','.join(header)})"
                    )
            wanted = {c: index[c] for c in (*required, *optional) if c in index}
            width = len(header)
            for cells in reader:
                if _skippable(cells):
                    continue
                if len(cells) != width:
                    raise TraceError(
                        name, reader.line_num, "", f"expected {width} fields, got {len(cells)}"
                    )
                yield wanted, reader.line_num, cells


def parse_int(path: str, line: int, column: str, text: str, minimum: int | None = None) -> int:
    """An integer cell; ``"8.0"`` is accepted (some exports write integers as floats)."""
    text = text.strip()
    try:
        value = int(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            raise TraceError(path, line, column, f"not an integer: {text!r}") from None
        if not as_float.is_integer():
            raise TraceError(path, line, column, f"not an integer: {text!r}") from None
        value = int(as_float)
    if minimum is not None and value < minimum:
        raise TraceError(path, line, column, f"must be >= {minimum}, got {value}")
    return value


def parse_float(
    path: str, line: int, column: str, text: str, *, positive: bool = False
) -> float:
    """A finite number of seconds; *positive* demands > 0, otherwise >= 0."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        raise TraceError(path, line, column, f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise TraceError(path, line, column, f"must be finite, got {text!r}")
    if positive and value <= 0:
        raise TraceError(path, line, column, f"must be > 0, got {text!r}")
    if not positive and value < 0:
        raise TraceError(path, line, column, f"must be >= 0, got {text!r}")
    return value


def require_text(path: str, line: int, column: str, text: str) -> str:
    value = text.strip()
    if not value:
        raise TraceError(path, line, column, "must not be empty")
    return value
