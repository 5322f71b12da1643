"""``plait decisions``: list the decisions people are asked, and answer them."""

from __future__ import annotations

from typing import Annotated

import typer

from plait.cli._common import MeshOption, fail, print_json, run, text_arg
from plait.cli._foreground import warn_if_unserved
from plait.cli._ids import DECISIONS, resolve
from plait.cli._output import JsonFlag, Output, OutputOption, as_text, mode, rows, say
from plait.cli.runs import human
from plait.decisions import DecisionAnswerer
from plait.ids import DecisionId
from plait.mesh import open_mesh

decisions_app = typer.Typer(help="List and answer human decisions.", no_args_is_help=True)


@decisions_app.command("list")
def list_cmd(
    status: Annotated[
        str | None,
        typer.Option("--status", metavar="STATUS", help="open, answered, cancelled or expired."),
    ] = None,
    as_json: JsonFlag = False,
    output: OutputOption = None,
    mesh: MeshOption = None,
) -> None:
    """List decisions, newest first."""
    shown = mode(output, as_json)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            found = await DecisionAnswerer(m).list(status)  # type: ignore[arg-type]
        if shown is Output.json:
            print_json([d.model_dump(mode="json") for d in found])
            return
        wide = shown is Output.wide
        rows(
            ("id", "status", "kind", "options", "run", "title"),
            [
                (
                    d.id,
                    d.status,
                    d.kind,
                    ", ".join(d.options),
                    d.run_id or "",
                    d.title if wide or not d.title else d.title.splitlines()[0],
                )
                for d in found
            ],
            narrow=(0, 1, 5),
            fit=5,
            ids=(0, 4),
            wide=wide,
        )

    run(main)


@decisions_app.command("answer")
def answer_cmd(
    decision_id: Annotated[
        str, typer.Argument(metavar="ID", help="The decision's id, or a prefix unique to it.")
    ],
    option: Annotated[str | None, typer.Option("--option", help="The chosen option.")] = None,
    text: Annotated[str | None, typer.Option("--text", help="A text answer.")] = None,
    as_json: JsonFlag = False,
    mesh: MeshOption = None,
) -> None:
    """Answer a decision (once: a second answer is refused)."""
    if (option is None) == (text is None):
        fail("give exactly one of --option or --text")
    text_arg(option if option is not None else text or "", "the answer")

    async def main() -> None:
        async with open_mesh(mesh) as m:
            whole = await resolve(m, DECISIONS, decision_id)
            d = await DecisionAnswerer(m).answer(
                DecisionId(whole), option=option, text=text, by=human()
            )
            if d.run_id:
                await warn_if_unserved(m)
        if as_json:
            print_json(d.model_dump(mode="json"))
        else:
            say(f"decision {d.id} {d.status}: ", as_text(d.value))

    run(main)
