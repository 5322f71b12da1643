"""``plait programs`` and ``plait exec``: saved programs, promotion, and running programs."""

from __future__ import annotations

import difflib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer

from plait.agents import Agents
from plait.cli._common import CreatingMeshOption, MeshOption, ReadingMeshOption, fail, print_json
from plait.cli._common import run as run_async
from plait.cli._output import console, data, rows, say, styled
from plait.cli.runs import ModelOption, human, refuse_bad_model
from plait.errors import PlaitError
from plait.mesh import Mesh, open_mesh
from plait.models import load_model
from plait.profiles import get_profile
from plait.programs import (
    DEFAULT_CATALOG,
    get_program,
    grant_all,
    list_programs,
    promote,
    run_program,
    run_source,
    save_program,
)

programs_app = typer.Typer(
    help="Saved programs: save, list, show, diff, promote and run them.", no_args_is_help=True
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
AgentOption = Annotated[
    str,
    typer.Option("--agent", help="The agent whose tools and pre-approvals gate tool calls."),
]
ApproveOption = Annotated[
    bool,
    typer.Option(
        "--approve-tools", help="Approve, as the person running this, every gated tool call."
    ),
]


@programs_app.command("save")
def save_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    file: Annotated[Path, typer.Argument(metavar="FILE", exists=True, dir_okay=False)],
    mesh: CreatingMeshOption = None,
) -> None:
    """Store FILE as the next version of NAME (unchanged if it is the newest text)."""
    text = _program_text(file)

    async def main() -> Any:
        async with open_mesh(mesh) as m:
            return await save_program(m, name, text)

    stored = run_async(main)
    say(f"saved {stored.name} version {stored.version} (sha256 {stored.sha256[:12]})")


@programs_app.command("list")
def list_cmd(as_json: JsonOption = False, mesh: MeshOption = None) -> None:
    """List saved programs, their versions and which are promoted."""

    async def main() -> Any:
        async with open_mesh(mesh) as m:
            return await list_programs(m)

    found = run_async(main)
    if as_json:
        print_json([p.model_dump(mode="json") for p in found])
        return
    if not found:
        say("no saved programs (save one with: plait programs save NAME FILE)")
        return
    rows(
        ["NAME", "LATEST", "VERSIONS", "PROMOTED"],
        [
            [p.name, p.latest, ", ".join(map(str, p.versions)), ", ".join(map(str, p.promoted))]
            for p in found
        ],
        fit=2,
    )


@programs_app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    version: Annotated[int | None, typer.Option("--version", help="Default: the newest.")] = None,
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Print one version of a saved program: its sha256, promotion and text."""

    async def main() -> Any:
        async with open_mesh(mesh) as m:
            return await get_program(m, name, version)

    stored = run_async(main)
    if as_json:
        print_json(stored.model_dump(mode="json"))
        return
    promoted = (
        f"promoted by {stored.promotion.by} at {_when(stored.promotion.at)}"
        if stored.promotion
        else "not promoted"
    )
    say(styled(f"{stored.name} version {stored.version}", "bold"), f"  sha256 {stored.sha256}")
    say(promoted)
    console.print(data(stored.text), soft_wrap=True, highlight=False, markup=False)


@programs_app.command("diff")
def diff_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    v1: Annotated[int, typer.Argument(metavar="V1")],
    v2: Annotated[int, typer.Argument(metavar="V2")],
    mesh: MeshOption = None,
) -> None:
    """Print a unified diff of versions V1 and V2 of NAME."""

    async def main() -> tuple[str, str]:
        async with open_mesh(mesh) as m:
            return (await get_program(m, name, v1)).text, (await get_program(m, name, v2)).text

    old, new = run_async(main)
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"{name}@{v1}",
        tofile=f"{name}@{v2}",
    )
    console.print(data("".join(lines)), soft_wrap=True, highlight=False, markup=False, end="")


@programs_app.command("promote")
def promote_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    version: Annotated[int, typer.Option("--version", help="The version to promote.")],
    mesh: MeshOption = None,
) -> None:
    """Promote VERSION of NAME (a person only); who and when are recorded."""
    person = human()

    async def main() -> Any:
        async with open_mesh(mesh) as m:
            return await promote(m, name, version, by=person)

    stored = run_async(main)
    assert stored.promotion is not None
    say(f"promoted {stored.name} version {stored.version} (by {stored.promotion.by})")


@programs_app.command("run")
def run_cmd(
    name: Annotated[
        str, typer.Argument(metavar="REF", help="A saved program (NAME[@V]) or pkg.module:fn.")
    ],
    input: Annotated[str, typer.Option("--input", help="The program's input, as JSON.")] = "{}",
    require_promoted: Annotated[
        bool, typer.Option("--require-promoted", help="Refuse a version that is not promoted.")
    ] = False,
    agent: AgentOption = "assistant",
    approve_tools: ApproveOption = False,
    model: ModelOption = None,
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Run a program in this process and print its result (``agents.run`` turns are
    answered by --model, else PLAIT_MODEL, else the agent profile's model)."""
    value = _json_arg(input, "--input")
    if model is not None:
        refuse_bad_model(model)

    async def main() -> Any:
        async with open_mesh(mesh) as m:
            grants = await _grants(m, agent, approve_tools, model)
            try:
                return await run_program(name, value, grants, require_promoted=require_promoted)
            except PlaitError:
                raise  # said in one line already by the command runner
            except Exception as exc:  # the operator's callable (or its import) failed
                fail(f"program {name!r} failed: {located(exc)}")

    _print_result(run_async(main), as_json)


def exec_cmd(
    file: Annotated[Path, typer.Argument(metavar="FILE", exists=True, dir_okay=False)],
    payload: Annotated[
        list[str] | None,
        typer.Option("--payload", metavar="KEY=VALUE", help="A payload entry (repeatable)."),
    ] = None,
    agent: AgentOption = "assistant",
    approve_tools: ApproveOption = False,
    model: ModelOption = None,
    as_json: JsonOption = False,
    mesh: ReadingMeshOption = None,
) -> None:
    """Run a program file in this process (top-level await and return allowed).

    Its ``agents.run`` turns are answered by --model, else PLAIT_MODEL, else the agent
    profile's model.
    """
    text = _program_text(file)
    if model is not None:
        refuse_bad_model(model)
    values: dict[str, str] = {}
    for item in payload or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--payload {item!r} is not KEY=VALUE")
        values[key] = value

    async def main() -> Any:
        async with open_mesh(mesh) as m:
            grants = await _grants(m, agent, approve_tools, model)
            return await run_source(text, values, grants, filename=str(file))

    _print_result(run_async(main), as_json)


async def _grants(mesh: Mesh, agent: str, approve_tools: bool, model: str | None) -> Any:
    profile = await get_profile(mesh, agent)

    async def approve(tool: str, args: dict[str, Any]) -> bool:
        return approve_tools

    by = f"program by {human().name}"
    return grant_all(
        mesh,
        profile=profile,
        approve=approve,
        by=by,
        agents=Agents(mesh, model=load_model(model) if model else None, programs=DEFAULT_CATALOG),
        programs=DEFAULT_CATALOG,
    )


def located(exc: BaseException) -> str:
    """``FILE:LINE: Type: message`` of an error raised by code outside plait: the
    innermost frame of its traceback in neither plait nor the installed packages (or
    the file a SyntaxError names), so a failing callable reads as one line."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}: SyntaxError: {exc.msg}"
    where = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        path = frame.f_code.co_filename
        if not path.startswith(_NOT_THEIRS):
            where = f"{path}:{line}"
    message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"{where}: {message}" if where else message


_PACKAGE = str(Path(__file__).parent.parent)
_NOT_THEIRS = tuple({_PACKAGE, sys.prefix, sys.base_prefix, sys.exec_prefix, "<"})
"""Where frames of plait, the standard library and installed packages come from."""


def _program_text(file: Path) -> str:
    """The text of a program file; exits 1 with one line if it is not UTF-8 text."""
    raw = file.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        fail(
            f"{file}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}): "
            "save the program as UTF-8"
        )


def _print_result(result: Any, as_json: bool) -> None:
    if as_json:
        print_json({"result": result})
    else:
        console.print(data(result), soft_wrap=True, highlight=False, markup=False)


def _json_arg(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{option} is not valid JSON ({exc.msg} at column {exc.colno}): {text!r}")


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


__all__ = ["exec_cmd", "programs_app"]
