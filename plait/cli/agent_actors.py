"""``plait agents list|show|start|tell|stop``: profiles, and agent profiles run as actors.

An agent actor (``agents start NAME``) runs its profile as a durable actor served by
``plait worker`` (or ``plait serve --serve-runs``): one agent turn per message it is
told or gets from a subscribed topic.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from plait.agents import AgentDetails, AgentInfo, Agents, agent_actor_id
from plait.cli._common import MeshOption, fail, print_json, run, text_arg
from plait.cli._foreground import warn_if_unserved
from plait.cli._ids import AGENT_ACTORS, resolve
from plait.cli._output import Output, OutputOption, rows, say, styled
from plait.cli.agents import JsonOption, _names, agents_app
from plait.cli.runs import human
from plait.errors import ActorNotFound
from plait.mesh import Mesh, open_mesh
from plait.profiles import AgentProfile, get_profile, list_profiles
from plait.profiles.store import profile_key


def _actor_json(info: AgentInfo) -> dict[str, Any]:
    return {
        "status": info.status,
        "profile": info.record.config.get("profile") or info.name,
        "topics": info.topics,
        "backlog": info.backlog,
        "max_concurrency": info.record.config.get("max_concurrency", 1),
        "turns": info.state.turns,
        "tokens_today": info.state.tokens,
        "dollars_today": info.state.dollars,
        "decision": info.state.decision,
        "untrusted_topics": info.record.config.get("untrusted_topics", []),
    }


@agents_app.command("list")
def list_cmd(
    as_json: JsonOption = False, output: OutputOption = None, mesh: MeshOption = None
) -> None:
    """List agent profiles, and the agent actors running them (status, backlog)."""

    async def main() -> tuple[list[AgentProfile], list[AgentInfo]]:
        async with open_mesh(mesh) as m:
            return await list_profiles(m), await Agents(m).list()

    profiles, actors = run(main)
    by_name = {a.name: a for a in actors}
    if as_json or output is Output.json:
        listed: list[dict[str, Any]] = []
        for p in profiles:
            item = p.model_dump(mode="json")
            if p.name in by_name:
                item["actor"] = _actor_json(by_name.pop(p.name))
            listed.append(item)
        listed += [{"name": a.name, "actor": _actor_json(a)} for a in by_name.values()]
        print_json(listed)
        return
    wide = output is Output.wide
    if profiles or not actors:
        say(styled("profiles", "bold"))
        rows(
            ["name", "model", "tools"],
            [[p.name, p.model or "", ", ".join(p.tools)] for p in profiles],
            fit=2,
            wide=wide,
        )
    if actors:
        if profiles:
            say("")
        say(styled("actors", "bold"))
        rows(
            ["name", "profile", "status", "backlog", "topics"],
            [
                [
                    a.name,
                    a.record.config.get("profile") or a.name,
                    a.status,
                    a.backlog,
                    ", ".join(a.topics),
                ]
                for a in actors
            ],
            fit=4,
            wide=wide,
        )


@agents_app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    turns: Annotated[
        int, typer.Option("--turns", min=1, metavar="N", help="How many last turns to show.")
    ] = 10,
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Show the agent profile NAME and, if it runs as an actor, its backlog and last turns."""
    text_arg(name, "NAME")

    async def main() -> tuple[AgentProfile | None, AgentDetails | None]:
        async with open_mesh(mesh) as m:
            whole = name
            if await m.get(profile_key(name)) is None:  # a profile's own name is itself
                whole = await resolve(m, AGENT_ACTORS, name)
            details = await _details(m, whole, turns)
            if details is not None and not await m.get(profile_key(whole)):
                return None, details  # an actor running another profile
            return await get_profile(m, whole), details

    profile, details = run(main)
    if as_json:
        shown: dict[str, Any] = profile.model_dump(mode="json") if profile else {"name": name}
        if details is not None:
            shown["actor"] = _actor_json(details) | {
                "messages": [e.value for e in details.messages],
                "last_turns": [t.model_dump(mode="json") for t in details.turns],
                "conversation_messages": details.conversation,
                "conversation_tainted": details.tainted,
            }
        print_json(shown)
        return
    if profile is not None:
        for label, value in (
            ("name", profile.name),
            ("model", profile.model or "(the caller's: --model or PLAIT_MODEL)"),
            ("tools", ", ".join(profile.tools) or "none"),
            ("pre-approved", ", ".join(profile.pre_approved) or "none"),
            ("delegates", ", ".join(profile.delegates) or "none"),
            ("instructions", profile.system_prompt),
        ):
            say(styled(f"{label}: ", "bold"), value)
    if details is not None:
        _say_actor(details)


async def _details(m: Mesh, name: str, turns: int) -> AgentDetails | None:
    try:
        return await Agents(m).show(name, turns=turns)
    except ActorNotFound:
        return None  # a profile not run as an actor


def _say_actor(d: AgentDetails) -> None:
    say(styled("actor: ", "bold"), d.record.id, " ", styled(d.status, "bold"))
    say(styled("topics: ", "bold"), ", ".join(d.topics) or "none")
    say(
        styled("today: ", "bold"),
        f"{d.state.tokens} tokens, ${d.state.dollars:.4f}; {d.state.turns} turns in all",
    )
    if d.state.decision:
        say(styled("waits on decision: ", "bold"), d.state.decision)
    if d.tainted:
        say(
            styled("conversation: ", "bold"),
            "holds outside content: its turns run untrusted (no pre-approved tools)",
        )
    say(styled(f"backlog ({d.backlog}):", "bold"))
    for entry in d.messages:
        say("  ", entry.key.rsplit("/", 1)[1], "  ", entry.value.get("body"))
    say(styled(f"last turns ({len(d.turns)}):", "bold"))
    for t in d.turns:
        at = time.strftime("%H:%M:%S", time.localtime(t.at))
        tools = f" [{', '.join(t.tools)}]" if t.tools else ""
        tainted = " (untrusted)" if t.tainted else ""
        say(
            f"  #{t.seq} {at} {t.outcome}{tainted}{tools}: ",
            t.prompt,
            styled(" → ", "dim"),
            t.text,
        )


@agents_app.command("start")
def start_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    profile: Annotated[
        str | None,
        typer.Option("--profile", metavar="PROFILE", help="The profile it runs (default NAME)."),
    ] = None,
    topics: Annotated[
        str | None,
        typer.Option("--topics", metavar="T1,T2", help="Topics (or prefixes like tasks.*)."),
    ] = None,
    max_concurrency: Annotated[
        int, typer.Option("--max-concurrency", min=1, metavar="N", help="Turns at once.")
    ] = 1,
    from_earliest: Annotated[
        bool,
        typer.Option(
            "--from-earliest", help="New subscriptions get every event their topics still hold."
        ),
    ] = False,
    window: Annotated[
        int | None,
        typer.Option("--window", min=2, metavar="N", help="Conversation messages carried."),
    ] = None,
    tokens_per_day: Annotated[
        int | None, typer.Option("--tokens-per-day", min=0, metavar="N")
    ] = None,
    dollars_per_day: Annotated[
        float | None, typer.Option("--dollars-per-day", min=0, metavar="X")
    ] = None,
    on_indeterminate: Annotated[
        str | None,
        typer.Option(
            "--on-indeterminate",
            metavar="retry|skip|escalate",
            help="A turn a crash interrupted after effects outside the mesh.",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="A model overriding the profile's.")
    ] = None,
    untrusted_topics: Annotated[
        str | None,
        typer.Option(
            "--untrusted-topics",
            metavar="T1,T2",
            help="Topics (or prefixes) of outside content: their events' turns run untrusted.",
        ),
    ] = None,
    runner: Annotated[
        str | None,
        typer.Option(
            "--runner",
            metavar="model|pi",
            help="model: a model turn per message (default); pi: the model writes one "
            "program per message, which runs sandboxed with the actor's capabilities.",
        ),
    ] = None,
    instructions: Annotated[
        str | None,
        typer.Option("--instructions", help="The actor's instructions, in place of its profile's."),
    ] = None,
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Run the agent profile as the durable actor agent:NAME (a worker serves it)."""
    text_arg(name, "NAME")
    config: dict[str, Any] = {}
    if runner is not None:
        if runner not in ("model", "pi"):
            fail("--runner is one of model, pi", code=2)
        config["runner"] = runner
    if instructions is not None:
        config["instructions"] = instructions
    if untrusted_topics is not None:
        config["untrusted_topics"] = _names(untrusted_topics)
    if window is not None:
        config["window"] = window
    if on_indeterminate is not None:
        if on_indeterminate not in ("retry", "skip", "escalate"):
            fail("--on-indeterminate is one of retry, skip, escalate", code=2)
        config["on_indeterminate"] = on_indeterminate
    if model is not None:
        config["model"] = model
    budget = {
        k: v
        for k, v in (("tokens_per_day", tokens_per_day), ("dollars_per_day", dollars_per_day))
        if v is not None
    }
    if budget:
        config["budget"] = budget

    async def main() -> AgentInfo:
        async with open_mesh(mesh) as m:
            agents = Agents(m)
            await agents.start(
                name,
                profile=profile,
                topics=_names(topics),
                max_concurrency=max_concurrency,
                start="earliest" if from_earliest else "new",
                **config,
            )
            await warn_if_unserved(m)
            return await agents.show(name, turns=1)

    info = run(main)
    if as_json:
        print_json({"name": info.name, "id": info.record.id} | _actor_json(info))
        return
    say("started ", info.record.id, f" (topics: {', '.join(info.topics) or 'none'})")


@agents_app.command("tell")
def tell_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    message: Annotated[str, typer.Argument(metavar="MESSAGE")],
    untrusted: Annotated[
        bool,
        typer.Option(
            "--untrusted",
            help="The message is outside content (a forwarded mail, a page): its turn and "
            "the turns after it run untrusted, without pre-approved tools.",
        ),
    ] = False,
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Send the agent actor NAME a message (one turn handles it); print its id."""
    text_arg(name, "NAME")
    text_arg(message, "MESSAGE")

    async def main() -> tuple[str, str]:
        async with open_mesh(mesh) as m:
            whole = await resolve(m, AGENT_ACTORS, name)
            told = await Agents(m).tell(whole, message, untrusted=untrusted)
            await warn_if_unserved(m)
            return whole, told

    whole, told = run(main)
    if as_json:
        print_json({"agent": whole, "message": told, "untrusted": untrusted})
        return
    say(f"told {agent_actor_id(whole)}: message ", styled(told, "bold"))


@agents_app.command("stop")
def stop_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Stop the agent actor NAME: its subscriptions end, later messages are dropped."""
    text_arg(name, "NAME")

    async def main() -> str:
        async with open_mesh(mesh) as m:
            whole = await resolve(m, AGENT_ACTORS, name)
            await Agents(m).stop(whole)
            return whole

    whole = run(main)
    if as_json:
        print_json({"name": whole, "id": agent_actor_id(whole), "status": "stopped"})
        return
    say("stopped ", agent_actor_id(whole))


@agents_app.command("reset")
def reset_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    as_json: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Let go of the agent actor NAME's conversation, and with it its taint (a person
    only): its next turn starts afresh, with its pre-approved tools back."""
    text_arg(name, "NAME")

    async def main() -> tuple[str, int]:
        by = human()  # refused in a process a tool started
        async with open_mesh(mesh) as m:
            whole = await resolve(m, AGENT_ACTORS, name)
            return whole, await Agents(m).reset(whole, by=by)

    whole, dropped = run(main)
    if as_json:
        print_json({"name": whole, "id": agent_actor_id(whole), "messages_dropped": dropped})
        return
    say("reset ", agent_actor_id(whole), f": {dropped} message(s) let go, its taint cleared")


__all__ = ["list_cmd", "reset_cmd", "show_cmd", "start_cmd", "stop_cmd", "tell_cmd"]
