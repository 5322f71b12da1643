"""How the CLI prints: run data as data, tables that fit the width, plain output when piped.

Everything a command prints goes through here. Text from run data (model replies, tool
output, asks, answers, errors) is never parsed as rich markup and never reaches the
terminal with its control characters: :func:`clean` shows them escaped (``\\x1b``), and
:func:`say` builds a :class:`rich.text.Text` from parts, so nothing is a template.
"""

from __future__ import annotations

import json
import re
import time
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
        help="table (default: main columns, fit to the width), wide (every column, whole) or json.",
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
    fit: int | Sequence[int] | None = None,
    wide: bool = False,
    narrow: Sequence[int] | None = None,
    ids: Sequence[int] = (),
    out: Console | None = None,
) -> None:
    """Print a table as aligned columns: no borders, one row a line.

    In table mode (not ``wide``) only the columns ``narrow`` lists are shown (every
    column if None), and the free-text column(s) ``fit`` (never an id) are cut to keep
    rows within the width: the terminal's, or piped ``COLUMNS`` else 80. On a terminal the
    id columns ``ids`` show each id by its shortest prefix unique among those shown
    (:func:`short_ids`), which every command taking an id accepts. ``wide`` shows every
    column and every cell whole; piped, ids are always whole.
    """
    out = out or console
    keep = list(range(len(headers))) if wide or narrow is None else list(narrow)
    heads = [headers[i] for i in keep]
    grid = [[cell(row[i]) for i in keep] for row in table]
    if not wide and out.is_terminal:
        for column in (keep.index(i) for i in ids if i in keep):
            short = short_ids([r[column] for r in grid if r[column]])
            for r in grid:
                r[column] = short.get(r[column], r[column])
    widths = [max(len(r[i]) for r in [heads, *grid]) for i in range(len(heads))]
    fits = [keep.index(i) for i in ((fit,) if isinstance(fit, int) else fit or ()) if i in keep]
    if fits and not wide:
        room = out.width - sum(w + 2 for i, w in enumerate(widths) if i not in fits) + 2
        # the narrowest first: what one does not need is left to the others
        for left, at in enumerate(sorted(fits, key=lambda i: widths[i]), start=0):
            share = room // (len(fits) - left) - 2
            limit = max(share, len(heads[at]), 8)
            for r in grid:
                if len(r[at]) > limit:
                    r[at] = r[at][: limit - 1] + "…"
            widths[at] = min(widths[at], limit)
            room -= widths[at] + 2
    for index, r in enumerate([heads, *grid]):
        text = "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        out.print(
            Text(text, style="bold" if index == 0 else ""),
            soft_wrap=True,
            highlight=False,
            markup=False,
        )


_ID_KIND = re.compile(r"^[A-Za-z.:-]*_")
"""The kind part of an id (``grun_``, ``ask.grun_``, ``sch_``), never shortened into."""

MIN_TAIL = 8
"""Characters past an id's kind part a short id keeps at least."""


def short_ids(ids: Sequence[str]) -> dict[str, str]:
    """Each of ``ids`` by its shortest prefix unique among them (whole where no prefix
    is shorter), keeping its kind part and :data:`MIN_TAIL` characters past it."""
    unique = sorted(set(ids))
    shown: dict[str, str] = {}
    for index, whole in enumerate(unique):
        kind = _ID_KIND.match(whole)
        need = (kind.end() if kind else 0) + MIN_TAIL
        # sorted: the longest prefix shared with any other id is shared with a neighbour
        for other in unique[max(index - 1, 0) : index + 2]:
            if other != whole:
                need = max(need, _shared(whole, other) + 1)
        shown[whole] = whole[:need] if need < len(whole) else whole
    return shown


def _shared(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return size


def span(seconds: float) -> str:
    """A length of time in its largest whole unit: ``45s``, ``12m``, ``3h``, ``9d``."""
    whole = max(0, int(seconds))
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def age(ts: float) -> str:
    """How long ago epoch second ``ts`` was (:func:`span`), as kubectl's AGE."""
    return span(time.time() - ts)


__all__ = [
    "C1_AND_BIDI",
    "JsonFlag",
    "Output",
    "OutputOption",
    "age",
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
    "short_ids",
    "span",
    "styled",
]
