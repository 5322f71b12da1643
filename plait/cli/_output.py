"""How the CLI prints: run data as data, tables with whole ids, plain output when piped.

Everything a command prints goes through here. Text from run data (model replies, tool
output, asks, answers, errors) is never parsed as rich markup and never reaches the
terminal with its control characters: :func:`clean` shows them escaped (``\\x1b``), and
:func:`say` builds a :class:`rich.text.Text` from parts, so nothing is a template.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

# DEL, C1 controls, and the bidirectional overrides that reorder what a person reads.
_BEYOND_C0 = "\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
C1_AND_BIDI = re.compile(f"[{_BEYOND_C0}]")
"""What JSON output leaves raw but a terminal may act on."""
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f{_BEYOND_C0}]")  # all but \n and \t
_CELL_BREAKS = re.compile("[\n\t]")

console = Console()
"""Standard output."""
err_console = Console(stderr=True)
"""Standard error: progress, notes and errors."""


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str) -> str:
    """``text`` with every terminal control character but newline and tab shown escaped."""
    return _CONTROL.sub(_escaped, text)


def as_text(value: Any) -> str:
    """A value of run data as printed: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=repr)


def data(value: Any, style: str | None = None) -> Text:
    """Run data as a Text: cleaned, never markup."""
    return Text(clean(as_text(value)), style=style or "")


def styled(label: str, style: str) -> Text:
    """One of the CLI's own words, styled."""
    return Text(label, style=style)


def line(*parts: str | Text) -> Text:
    """A line from parts: a str is data (cleaned, literal), a Text is kept as built."""
    out = Text()
    for part in parts:
        out.append_text(part if isinstance(part, Text) else data(part))
    return out


def say(*parts: str | Text, stderr: bool = False) -> None:
    """Print :func:`line` of ``parts``, never wrapped by rich (the terminal wraps it)."""
    (err_console if stderr else console).print(
        line(*parts), soft_wrap=True, highlight=False, markup=False
    )


class Output(StrEnum):
    """How a command prints what it found."""

    table = "table"
    wide = "wide"
    json = "json"


OutputOption = Annotated[
    Output | None,
    typer.Option(
        "--output",
        "-o",
        metavar="FORMAT",
        help="table (default), wide (every column in full) or json.",
        show_default=False,
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (same as --output json).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def utc_time(ts: float) -> str:
    """Epoch seconds as ``YYYY-MM-DD HH:MM:SS`` (UTC)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def mode(output: Output | None, as_json: bool) -> Output:
    """The output chosen by ``--output`` and ``--json`` (table if neither)."""
    if as_json:
        return Output.json
    return output or Output.table


def cell(value: Any) -> str:
    """A table cell: cleaned, its line breaks shown escaped (one row, one line)."""
    text = clean("" if value is None else as_text(value))
    return _CELL_BREAKS.sub(lambda m: "\\n" if m.group() == "\n" else "\\t", text)


def rows(
    headers: Sequence[str],
    table: Sequence[Sequence[Any]],
    *,
    fit: int | None = None,
    wide: bool = False,
    out: Console | None = None,
) -> None:
    """Print a table as aligned columns: no borders, one row a line, every cell whole.

    Only column ``fit`` (free text, never an id) is shortened, and only on a terminal in
    table mode, to keep rows within its width; piped or ``wide``, nothing is cut.
    """
    out = out or console
    grid = [[cell(c) for c in row] for row in table]
    heads = list(headers)
    widths = [max(len(r[i]) for r in [heads, *grid]) for i in range(len(heads))]
    if fit is not None and out.is_terminal and not wide:
        room = out.width - sum(w + 2 for i, w in enumerate(widths) if i != fit)
        limit = max(room, len(heads[fit]), 12)
        for r in grid:
            if len(r[fit]) > limit:
                r[fit] = r[fit][: limit - 1] + "…"
        widths[fit] = min(widths[fit], limit)
    for index, r in enumerate([heads, *grid]):
        text = "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        out.print(
            Text(text, style="bold" if index == 0 else ""),
            soft_wrap=True,
            highlight=False,
            markup=False,
        )


__all__ = [
    "C1_AND_BIDI",
    "JsonFlag",
    "Output",
    "OutputOption",
    "as_text",
    "cell",
    "clean",
    "console",
    "data",
    "err_console",
    "line",
    "mode",
    "rows",
    "say",
    "styled",
]
