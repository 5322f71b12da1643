"""What every CLI command shares: the mesh option, running async code, error output."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from plait.errors import PlaitError, VersionConflict

T = TypeVar("T")

console = Console()
err_console = Console(stderr=True)

MeshOption = Annotated[
    str | None,
    typer.Option(
        "--mesh",
        envvar="PLAIT_MESH",
        help="Mesh URL: memory://, sqlite:///PATH or redis://HOST:PORT/DB "
        "(default: PLAIT_MESH, else sqlite:///.plait/mesh.db).",
        show_default=False,
    ),
]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` as an error and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


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
        fail(str(exc))


async def _call(main: Callable[[], Awaitable[T]]) -> T:
    return await main()


def print_json(value: Any) -> None:
    """Print ``value`` as JSON on stdout (bytes shown as latin-1 strings)."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=_jsonable) + "\n")


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return value.decode("latin-1")
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
