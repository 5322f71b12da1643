"""``plait mesh publish|tail``: publish an event on a topic, and follow a topic's events."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import anyio
import typer

from plait.cli._common import MeshOption, fail, print_json, run, text_arg
from plait.cli._output import say, styled
from plait.cli.mesh import mesh_app
from plait.ids import new_id
from plait.mesh import Event, open_mesh


def _json_arg(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text_arg(text, what))
    except json.JSONDecodeError as exc:
        fail(f"{what} is not valid JSON ({exc.msg} at column {exc.colno}): {text!r}")


@mesh_app.command("publish")
def publish_cmd(
    topic: Annotated[str, typer.Argument(metavar="TOPIC")],
    kind: Annotated[str, typer.Argument(metavar="KIND", help="The event's kind (a short name).")],
    data: Annotated[
        str | None, typer.Option("--data", metavar="JSON", help="The payload, as JSON.")
    ] = None,
    after_ms: Annotated[
        int, typer.Option("--after-ms", min=0, metavar="N", help="Deliver N ms from now.")
    ] = 0,
    key: Annotated[
        str | None,
        typer.Option(
            "--key", metavar="K", help="A schedule key: a pending event with it is replaced."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    mesh: MeshOption = None,
) -> None:
    """Publish an event of KIND on TOPIC and print its id; subscribed actors get it."""
    payload = _json_arg(data, "--data")
    text_arg(topic, "TOPIC")
    text_arg(kind, "KIND")
    if key is not None:
        text_arg(key, "--key")

    async def main() -> str:
        async with open_mesh(mesh) as m:
            return await m.publish(topic, kind, payload, after_ms=after_ms, key=key)

    try:
        event_id = run(main)
    except ValueError as exc:
        fail(str(exc), code=2)
    if as_json:
        print_json({"id": event_id, "topic": topic, "kind": kind, "after_ms": after_ms, "key": key})
        return
    say(event_id)


def _show(event: Event, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "id": event.id,
                "topic": event.topic,
                "kind": event.kind,
                "data": event.data,
                "at_ms": event.at_ms,
            }
        )
        sys.stdout.flush()
    else:
        say(
            styled(event.id, "dim"),
            " ",
            event.topic,
            " ",
            styled(event.kind, "bold"),
            " ",
            event.data,
        )


@mesh_app.command("tail")
def tail_cmd(
    topic: Annotated[str, typer.Argument(metavar="TOPIC")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object a line.")] = False,
    count: Annotated[
        int | None,
        typer.Option("--count", min=1, metavar="N", help="Stop after N events."),
    ] = None,
    from_earliest: Annotated[
        bool,
        typer.Option("--from-earliest", help="Start with every event the topic still holds."),
    ] = False,
    mesh: MeshOption = None,
) -> None:
    """Follow TOPIC: print each event published on it from now on, until interrupted."""
    text_arg(topic, "TOPIC")
    # A group of its own, dropped at the end: tailing never takes events from anyone.
    group = f"tail:{new_id()}"

    async def main() -> None:
        async with open_mesh(mesh) as m:
            sub = m.subscribe(topic, group, "tail", start="begin" if from_earliest else "new")
            seen = 0
            try:
                async with sub:
                    async for delivery in sub:
                        _show(delivery.event, as_json)
                        await delivery.ack()
                        seen += 1
                        if count is not None and seen >= count:
                            return
            finally:
                with anyio.CancelScope(shield=True):
                    await m.drop_group(topic, group)

    try:
        run(main)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


__all__ = ["publish_cmd", "tail_cmd"]
