"""``plait mesh``: read and write mesh keys by hand."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from plait.cli._common import MeshOption, console, fail, print_json, run
from plait.cli._output import rows, say
from plait.mesh import open_mesh

mesh_app = typer.Typer(help="Read and write keys of the mesh.", no_args_is_help=True)


@mesh_app.command("get")
def get(
    key: Annotated[str, typer.Argument(metavar="KEY")],
    as_json: Annotated[bool, typer.Option("--json", help="Print {key, value, version}.")] = False,
    mesh: MeshOption = None,
) -> None:
    """Print the value and version stored at KEY (exit 1 if there is none)."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            entry = await m.get(key)
        if entry is None:
            fail(f"no key {key!r} in the mesh")
        if as_json:
            print_json({"key": entry.key, "value": entry.value, "version": entry.version})
        else:
            console.print(f"[bold]{entry.key}[/] (version {entry.version})", highlight=False)
            console.print_json(json.dumps(entry.value, default=repr))

    run(main)


@mesh_app.command("put")
def put(
    key: Annotated[str, typer.Argument(metavar="KEY")],
    json_value: Annotated[str, typer.Argument(metavar="JSON_VALUE", help="The value, as JSON.")],
    if_version: Annotated[
        int | None,
        typer.Option(
            "--if-version",
            min=0,
            help="Write only if the current version is N (0: only if KEY does not exist).",
        ),
    ] = None,
    mesh: MeshOption = None,
) -> None:
    """Write JSON_VALUE at KEY and print the new version."""
    try:
        value = json.loads(json_value)
    except json.JSONDecodeError as exc:
        fail(f"JSON_VALUE is not valid JSON ({exc.msg} at column {exc.colno}): {json_value!r}")

    async def main() -> None:
        async with open_mesh(mesh) as m:
            entry = await m.put(key, value, if_version=if_version)
        say(entry.key, f" version {entry.version}")

    run(main)


@mesh_app.command("ls")
def ls(
    prefix: Annotated[
        str, typer.Argument(metavar="PREFIX", help="Only keys starting with this.")
    ] = "",
    mesh: MeshOption = None,
) -> None:
    """List keys (with their versions) in key order, under a header row."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            found = [(entry.key, entry.version) async for entry in m.scan(prefix)]
        rows(("key", "version"), found)  # keys are data: an agent's mesh_put

    run(main)


@mesh_app.command("migrate")
def migrate(mesh: MeshOption = None) -> None:
    """Create the mesh's tables or bring them to this plait's layout (idempotent)."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            say(await m.migrate())

    run(main)
