"""``plait tokens``: the bearer tokens of ``plait serve``, each a human or a service."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from plait.api.tokens import TokenKind, create_token, list_tokens, revoke_token
from plait.cli._common import CreatingMeshOption, MeshOption, fail, print_json, run, text_arg
from plait.cli._ids import TOKENS, resolve
from plait.cli._output import JsonFlag, Output, OutputOption, mode, rows, say
from plait.cli.runs import human as person
from plait.mesh import open_mesh

tokens_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)


@tokens_app.command("create")
def create_cmd(
    human: Annotated[
        str | None,
        typer.Option("--human", metavar="NAME", help="A token for a person, who may decide."),
    ] = None,
    service: Annotated[
        str | None,
        typer.Option(
            "--service", metavar="NAME", help="A token for automation, which may not decide."
        ),
    ] = None,
    as_json: JsonFlag = False,
    mesh: CreatingMeshOption = None,
) -> None:
    """Create a token and print it, once: only its hash is stored."""
    if (human is None) == (service is None):
        fail("give exactly one of --human NAME or --service NAME", 2)
    kind: TokenKind = "human" if human is not None else "service"
    name = text_arg(human if human is not None else service or "", "the name")
    if kind == "human":
        person()  # a token that decides is minted by a person, never by a tool's command

    async def main() -> None:
        async with open_mesh(mesh) as m:
            record, token = await create_token(m, kind, name)
        if as_json:
            print_json({**record.model_dump(exclude={"sha256"}), "token": token})
            return
        say(f"created {kind} token {record.id} for {name!r}; it is shown only now:", stderr=True)
        say(token)

    run(main)


def _when(ts: float | None) -> str:
    return "" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


@tokens_app.command("list")
def list_cmd(
    as_json: JsonFlag = False, output: OutputOption = None, mesh: MeshOption = None
) -> None:
    """List tokens (never their secrets), oldest first."""
    shown = mode(output, as_json)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            found = await list_tokens(m)
        if shown is Output.json:
            print_json([t.model_dump(exclude={"sha256"}) for t in found])
            return
        rows(
            ("id", "kind", "name", "created", "revoked"),
            [(t.id, t.kind, t.name, _when(t.created_at), _when(t.revoked_at)) for t in found],
            narrow=(0, 1, 2, 3),
            fit=2,
            wide=shown is Output.wide,
        )

    run(main)


@tokens_app.command("revoke")
def revoke_cmd(
    token_id: Annotated[
        str, typer.Argument(metavar="ID", help="The token's id, or a prefix unique to it.")
    ],
    mesh: MeshOption = None,
) -> None:
    """Revoke a token: the API refuses it from now on."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            record = await revoke_token(m, await resolve(m, TOKENS, token_id))
        say(f"revoked token {record.id} ({record.kind} {record.name!r})")

    run(main)


__all__ = ["tokens_app"]
