"""``plait decisions``: list the decisions people are asked, and answer them."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from plait.cli._common import MeshOption, console, fail, print_json, run
from plait.cli.runs import human
from plait.decisions import DecisionDesk
from plait.mesh import open_mesh

decisions_app = typer.Typer(help="List and answer human decisions.", no_args_is_help=True)


@decisions_app.command("list")
def list_cmd(
    status: Annotated[
        str | None, typer.Option("--status", help="open, answered, cancelled or expired.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
    mesh: MeshOption = None,
) -> None:
    """List decisions, newest first."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            found = await DecisionDesk(m).list(status)  # type: ignore[arg-type]
        if as_json:
            print_json([d.model_dump(mode="json") for d in found])
            return
        table = Table("id", "status", "kind", "options", "run", "title")
        for d in found:
            table.add_row(
                d.id,
                d.status,
                d.kind,
                ", ".join(d.options),
                d.run_id or "",
                d.title.splitlines()[0][:60] if d.title else "",
            )
        console.print(table)

    run(main)


@decisions_app.command("answer")
def answer_cmd(
    decision_id: Annotated[str, typer.Argument(metavar="ID")],
    option: Annotated[str | None, typer.Option("--option", help="The chosen option.")] = None,
    text: Annotated[str | None, typer.Option("--text", help="A text answer.")] = None,
    mesh: MeshOption = None,
) -> None:
    """Answer a decision (once: a second answer is refused)."""
    if (option is None) == (text is None):
        fail("give exactly one of --option or --text")

    async def main() -> None:
        async with open_mesh(mesh) as m:
            d = await DecisionDesk(m).answer(decision_id, option=option, text=text, by=human())
        console.print(f"decision {d.id} {d.status}: {d.value}", highlight=False)

    run(main)
