"""The actor kind the runtime conformance suite runs, and a reader of what it did.

The kind keeps no state in this process: it writes what it sees to a mesh topic
(:data:`LOG_TOPIC`), so the suite reads the same log whichever process a runtime
handles the message in. What it does is said by the message body:

- ``n``: a label, logged.
- ``fail_until``: raise on attempts up to this one.
- ``hang_until``: wait forever on attempts up to this one.
- ``sleep``: seconds to sleep before finishing.
- ``conflict_until``: on attempts up to this one, commit the ack in a transaction that
  fails its version check (so the ack does not land) and raise.
- ``ack_then_raise``: commit an effect and the ack in one transaction, then raise.
- ``chain``: tell itself ``chain - 1`` in a transaction that takes it too (the
  commit-time hand-off), down to 0.
- ``service``: log the runtime's services as :class:`Services`, or the error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import anyio

from plait.actors import ActorContext, Mail, tell_in
from plait.errors import ActorError
from plait.mesh import Mesh, Subscription
from tests._support.deliveries import undelivered_mail
from tests._support.timing import scaled

KIND = "conformance:behave"
"""The kind name the suite creates its actors with."""

LOG_TOPIC = "conformance.log"
"""Where the kind writes what it sees."""

EFFECT_PREFIX = "conformance/effects/"

DRAINED = "drained"
"""The phase of the marker :meth:`LogReader.drained` publishes behind every entry."""


@dataclass
class Services:
    """What the suite's runtimes are given for handlers."""

    name: str


async def note(ctx: ActorContext, mail: Mail, phase: str, **extra: Any) -> None:
    """Write one log entry about ``mail``."""
    body = mail.body if isinstance(mail.body, dict) else {}
    await ctx.mesh.publish(
        LOG_TOPIC,
        phase,
        {
            "phase": phase,
            "actor": ctx.id,
            "n": body.get("n", body.get("chain")),
            "attempt": mail.attempt,
            "host": ctx.host,
            **extra,
        },
    )


class Behave:
    """The kind: a handler, and the dead-letter hook the runtime calls before it
    dead-letters a message."""

    async def __call__(self, ctx: ActorContext, mail: Mail) -> None:
        body: dict[str, Any] = mail.body
        attempt = mail.attempt
        await note(ctx, mail, "start")
        if body.get("fail_until", 0) >= attempt:
            raise RuntimeError("a planned failure")
        if body.get("hang_until", 0) >= attempt:
            await anyio.sleep_forever()
        if body.get("sleep"):
            await anyio.sleep(body["sleep"])
        if body.get("conflict_until", 0) >= attempt:
            async with ctx.mesh.transact() as tx:
                tx.put(EFFECT_PREFIX + ctx.id, attempt, if_version=1_000)
                mail.ack_in(tx)
        if body.get("ack_then_raise"):
            async with ctx.mesh.transact() as tx:
                tx.put(EFFECT_PREFIX + ctx.id, attempt)
                mail.ack_in(tx)
            raise RuntimeError("a failure after the ack committed")
        if body.get("chain"):
            tx = ctx.mesh.transact()
            tell_in(tx, ctx.id, {"chain": body["chain"] - 1})
            took = ctx.runtime.take_mail_in(tx, ctx.id)
            mail.ack_in(tx)
            done = await tx.commit()
            await note(ctx, mail, "sent", took=took, taken=len(done.taken))
            if took:
                ctx.runtime.handle_taken(done.taken)
        if body.get("service"):
            try:
                await note(ctx, mail, "service", name=ctx.service(Services).name)
            except ActorError as exc:
                await note(ctx, mail, "service", error=str(exc))
        await note(ctx, mail, "end")

    async def on_dead_letter(self, ctx: ActorContext, mail: Mail, reason: str) -> None:
        """Log the dead letter."""
        await note(ctx, mail, "dead", reason=reason)


BEHAVE = Behave()


class LogReader:
    """Reads the kind's log from its beginning."""

    def __init__(self, mesh: Mesh) -> None:
        self.sub: Subscription = mesh.subscribe(LOG_TOPIC, "reader", "r", start="begin")
        self.entries: list[dict[str, Any]] = []

    async def until(self, done: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Read until ``done(entries)`` holds (``timeout`` stretched on a busy machine);
        the entries so far."""
        with anyio.fail_after(scaled(timeout)):
            while not done(self.entries):
                delivery = await self.sub.__anext__()
                await delivery.ack()
                self.entries.append(delivery.data)
        return self.entries

    async def count(self, phase: str, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Read until ``n`` entries of ``phase`` are in; those entries."""
        await self.until(lambda es: len(self.of(phase)) >= n, timeout)
        return self.of(phase)

    async def drained(self, mesh: Mesh, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Once every runtime on ``mesh`` has stopped (its handlers drained): check that no
        mailbox message is left to deliver, then read every entry logged so far; every
        entry.

        This is how the suite says "nothing more comes" without waiting for silence: a
        message acked can never be delivered again, and none is left unacked; the
        ``drained`` marker, published after the runtimes stopped, arrives behind every
        entry their handlers wrote (a topic keeps its order).
        """
        left = await undelivered_mail(mesh)
        assert not left, f"mail left to deliver after the runtimes stopped: {left}"
        await mesh.publish(LOG_TOPIC, DRAINED, {"phase": DRAINED, "actor": "", "n": None})
        await self.until(lambda es: bool(es) and es[-1]["phase"] == DRAINED, timeout)
        self.entries.pop()
        return self.entries

    def of(self, phase: str, actor: str | None = None) -> list[dict[str, Any]]:
        """The entries of one phase (of one actor), in log order."""
        return [e for e in self.entries if e["phase"] == phase and actor in (None, e["actor"])]

    async def close(self) -> None:
        """Stop reading."""
        await self.sub.close()


REPORT_KIND = "conformance:report"
"""A kind that logs where it runs: its process and the Ray resources it holds."""


async def report(ctx: ActorContext, mail: Mail) -> None:
    """Log this process's pid and the Ray resources assigned to it."""
    import ray

    held = ray.get_runtime_context().get_assigned_resources()
    await note(ctx, mail, "report", pid=os.getpid(), resources=held)
