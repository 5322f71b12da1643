"""What every CLI command shares: the mesh option, running async code, error output."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from plait.cli._output import C1_AND_BIDI, say, styled
from plait.cli._output import console as console
from plait.cli._output import err_console as err_console
from plait.errors import MeshUnavailable, PlaitError, VersionConflict

T = TypeVar("T")

MeshOption = Annotated[
    str | None,
    typer.Option(
        "--mesh",
        envvar="PLAIT_MESH",
        metavar="URL",
        help="Mesh URL: memory://, sqlite:///PATH or redis://HOST:PORT/DB "
        "(default: PLAIT_MESH, else sqlite:///.plait/mesh.db).",
        show_default=False,
    ),
]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` as an error and exit with ``code``."""
    # The message may quote run data (a node's error, an answer): never markup.
    say(styled("error: ", "bold red"), message, stderr=True)
    raise typer.Exit(code)


def text_arg(value: str, what: str) -> str:
    """``value`` if it is valid text; else exit 2 naming ``what`` (say, invalid UTF-8 bytes).

    Python hands undecodable bytes of argv and the environment on as lone surrogates,
    which no store can encode: refuse them here, where the person can fix them.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        fail(f"{what} is not valid UTF-8 text (at character {exc.start}): pass UTF-8", code=2)
    return value


def run(main: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body, turning plait errors into a message and exit code 1."""
    try:
        return asyncio.run(_call(main))
    except VersionConflict as exc:
        fail(
            f"version conflict on {exc.key!r}: expected version {exc.expected}, "
            f"actual version {exc.actual}"
        )
    except PlaitError as exc:
        fail(_message(exc))
    except BaseExceptionGroup as group:
        # what a task group raises: a plait error of its tasks is still just that
        errors, rest = group.split(PlaitError)
        if errors is None or rest is not None:
            raise
        fail(_message(_first_leaf(errors)))


def _message(exc: BaseException) -> str:
    if isinstance(exc, MeshUnavailable):
        return f"{exc} (the mesh URL comes from --mesh or PLAIT_MESH)"
    return str(exc)


def _first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


async def _call(main: Callable[[], Awaitable[T]]) -> T:
    return await main()


def print_json(value: Any) -> None:
    """Print ``value`` as JSON on stdout (bytes shown as latin-1 strings)."""
    text = json.dumps(value, ensure_ascii=False, default=_jsonable)
    # JSON escapes C0 controls itself; C1 and bidi controls too, so none reaches a terminal.
    text = C1_AND_BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    sys.stdout.write(text + "\n")


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return value.decode("latin-1")
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
