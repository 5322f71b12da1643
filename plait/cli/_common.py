"""What every CLI command shares: the mesh option, running async code, error output."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from plait.cli._output import C1_AND_BIDI, say, styled
from plait.cli._output import console as console
from plait.cli._output import err_console as err_console
from plait.errors import MeshUnavailable, PlaitError, VersionConflict
from plait.mesh import MESH_DIR, find_mesh, redact_url, sqlite_path

T = TypeVar("T")

NO_MESH = "no plait mesh here or above: run `plait graph import FILE` or pass --mesh"


def existing_mesh(url: str | None) -> str:
    """The mesh URL a command uses, refusing one it would have to create.

    No URL means the default mesh: ``PLAIT_HOME``, else the nearest ``.plait/`` at or
    above the working directory. A SQLite file may be new, its directory may not.
    """
    found = url or find_mesh()
    if found is None:
        fail(NO_MESH)
    path = sqlite_path(found)
    if path is not None and not path.absolute().parent.is_dir():
        fail(
            f"no mesh directory {path.absolute().parent} for {redact_url(found)}: "
            "create it, or run `plait graph import FILE` to create the mesh there"
        )
    return found


def creating_mesh(url: str | None) -> str:
    """The mesh URL a command that may create the mesh uses; says where it created one."""
    found = url or find_mesh() or f"sqlite:///{Path.cwd() / MESH_DIR / 'mesh.db'}"
    path = sqlite_path(found)
    if path is not None and not path.absolute().is_file():
        path.absolute().parent.mkdir(parents=True, exist_ok=True)
        say(f"created the mesh {path.absolute()}", stderr=True)
    return found


_MESH_HELP = (
    "Mesh URL: memory://, sqlite:///PATH or redis://HOST:PORT/DB (default: PLAIT_MESH, "
    "else mesh.db in PLAIT_HOME, else in the nearest .plait/ at or above this directory)."
)


def _mesh_option(callback: Callable[[str | None], str]) -> Any:
    """The ``--mesh`` option, resolved by ``callback`` (which says what a missing mesh means)."""
    return typer.Option(
        "--mesh",
        envvar="PLAIT_MESH",
        metavar="URL",
        help=_MESH_HELP,
        show_default=False,
        callback=callback,
    )


def _mesh_or_memory(url: str | None) -> str:
    return existing_mesh(url) if url or find_mesh() else "memory://"


MeshOption = Annotated[str | None, _mesh_option(existing_mesh)]
"""The ``--mesh`` option of a command that needs a mesh to exist."""

CreatingMeshOption = Annotated[str | None, _mesh_option(creating_mesh)]
"""The ``--mesh`` option of a command that creates the default mesh if there is none."""

ReadingMeshOption = Annotated[str | None, _mesh_option(_mesh_or_memory)]
"""The ``--mesh`` option of a command that works without one (on an empty memory mesh)."""


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
