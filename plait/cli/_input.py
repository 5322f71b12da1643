"""A run's input from the command line: text, a file (``@FILE``) or JSON.

``--input TEXT`` is the text itself; ``--input @FILE`` the file's content (parsed as
JSON when the file's name ends in ``.json``; ``@@`` starts text with a literal ``@``);
``--input-json '{...}'`` a JSON value. JSON that does not parse is refused with one
line naming where: the option or the file, the line and the column.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from plait.cli._common import fail, text_arg

InputOption = Annotated[
    str | None,
    typer.Option(
        "--input",
        help="The run's input ({{input}}): TEXT, or @FILE for a file's content "
        "(JSON if FILE ends in .json; @@ for a literal leading @).",
    ),
]
InputJsonOption = Annotated[
    str | None,
    typer.Option("--input-json", metavar="JSON", help="The run's input as a JSON value."),
]


def parse_json(text: str, where: str) -> Any:
    """``text`` as JSON; else exit 2 saying ``where``, the line and the column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(
            f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            2,
        )


def run_input(text: str | None, as_json: str | None, default: Any = "") -> Any:
    """The input ``--input`` (``text``) and ``--input-json`` (``as_json``) give, or
    ``default`` with neither; exits 2 with one line on both, an unreadable file or bad
    JSON."""
    if text is not None and as_json is not None:
        fail("give --input or --input-json, not both", 2)
    if as_json is not None:
        return parse_json(text_arg(as_json, "--input-json"), "--input-json")
    if text is None:
        return default
    text_arg(text, "--input")
    if text.startswith("@@"):
        return text[1:]
    if not text.startswith("@"):
        return text
    path = Path(text[1:]).expanduser()
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        fail(
            f"cannot read the input file {str(path)!r} of --input {text}: {reason} "
            "(start the text with @@ for a literal @)",
            2,
        )
    return parse_json(content, str(path)) if path.suffix.lower() == ".json" else content


__all__ = ["InputJsonOption", "InputOption", "parse_json", "run_input"]
