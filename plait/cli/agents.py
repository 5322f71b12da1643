"""``plait agents put``: the agent profiles graphs name, from the CLI.

``list`` and ``show`` (profiles and the agent actors that run them) and the agent actor
commands (``start``, ``tell``, ``stop``) are in :mod:`plait.cli.agent_actors`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plait.cli._common import MeshOption, console, fail, run
from plait.mesh import open_mesh
from plait.profiles import AgentProfile, put_profile

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
