"""``plait agents put|list|show``: the agent profiles graphs name, from the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from plait.cli._common import MeshOption, console, fail, print_json, run
from plait.mesh import open_mesh
from plait.profiles import AgentProfile, get_profile, list_profiles, put_profile

agents_app = typer.Typer(
    help="Agent profiles: model, instructions and tools.", no_args_is_help=True
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


@agents_app.command("put")
def put_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    tools: Annotated[
        str | None, typer.Option("--tools", help="The agent's tools, comma-separated.")
    ] = None,
    pre_approve: Annotated[
        str | None,
        typer.Option(
            "--pre-approve",
            help="Tools (among --tools) that need no approval when the agent runs trusted.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="The agent's model (openai:MODEL, scripted:PATH...)."),
    ] = None,
    instructions: Annotated[
        Path | None,
        typer.Option(
            "--instructions",
            metavar="FILE",
            help="A text file: the agent's instructions (its system prompt).",
        ),
    ] = None,
    mesh: MeshOption = None,
) -> None:
    """Create or replace the agent profile NAME."""
    tool_names, approved = _names(tools), _names(pre_approve)
    stray = [t for t in approved if t not in tool_names]
    if stray:
        fail(f"--pre-approve names tools the agent does not have: {', '.join(stray)}")
    prompt = ""
    if instructions is not None:
        try:
            prompt = instructions.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read the instructions file {instructions}: {exc}")

    async def main() -> AgentProfile:
        profile = AgentProfile(
            name=name, model=model, system_prompt=prompt, tools=tool_names, pre_approved=approved
        )
        async with open_mesh(mesh) as m:
            await put_profile(m, profile)
        return profile

    profile = run(main)
    console.print(
        f"stored agent {profile.name} (tools: {', '.join(profile.tools) or 'none'})",
        highlight=False,
        markup=False,
    )


@agents_app.command("list")
def list_cmd(as_json: JsonOption = False, mesh: MeshOption = None) -> None:
    """List agent profiles by name."""

    async def main() -> list[AgentProfile]:
        async with open_mesh(mesh) as m:
            return await list_profiles(m)

    found = run(main)
    if as_json:
        print_json([p.model_dump(mode="json") for p in found])
        return
    table = Table("name", "model", "tools", "pre-approved")
    for p in found:
        table.add_row(p.name, p.model or "", ", ".join(p.tools), ", ".join(p.pre_approved))
    console.print(table)


@agents_app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Show the agent profile NAME."""

    async def main() -> AgentProfile:
        async with open_mesh(mesh) as m:
            return await get_profile(m, name)

    p = run(main)
    if as_json:
        print_json(p.model_dump(mode="json"))
        return
    for label, value in (
        ("name", p.name),
        ("model", p.model or "(the caller's: --model or PLAIT_MODEL)"),
        ("tools", ", ".join(p.tools) or "none"),
        ("pre-approved", ", ".join(p.pre_approved) or "none"),
        ("delegates", ", ".join(p.delegates) or "none"),
        ("instructions", p.system_prompt),
    ):
        console.print(f"{label}: {value}", highlight=False, markup=False)
