"""One agent actor message, parsed once per delivery: :class:`AgentMessage`.

A mailbox body is one of: a told message (``{"text": ..., "untrusted": true}``), an
event of a subscribed topic forwarded by a router (``{"topic_event": {...}}``), the
control message a parked actor's decision sends (``{"control": "resume", "decision":
...}``), or anything else a program told it (its JSON is the prompt). Each may carry a
W3C trace context (``traceparent``), so one conversation is one trace across actors.
The actor parses the body into an :class:`AgentMessage` once, and every part of the
turn asks it: the prompt, whether it is outside content, what makes two deliveries one.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from plait.actors.topics import TOPIC_EVENT, matches
from plait.agents.config import AgentActorConfig
from plait.agents.tools import UNTRUSTED

RESUME = "resume"
"""The control message a parked actor's decision sends it once closed."""

TRACEPARENT = "traceparent"
"""The key of a body's W3C trace context."""


class ForwardedEvent(BaseModel):
    """An event of a subscribed topic, as a router forwards it into a mailbox."""

    model_config = ConfigDict(frozen=True)

    id: str
    topic: str
    kind: str
    data: Any = None
    at_ms: int
    tainted: bool = False


class AgentMessage(BaseModel):
    """A mailbox body of an agent actor, parsed once.

    Attributes:
        body: the body as delivered (what a held message is told again as).
        text: a told message's text.
        untrusted: it was told as outside content.
        event: the topic event it forwards, if it is one.
        control: a control word (:data:`RESUME`), if it is a control message.
        decision: the decision a control message names.
        traceparent: the W3C trace context it carries, if any.
    """

    model_config = ConfigDict(frozen=True)

    body: Any = None
    text: str | None = None
    untrusted: bool = False
    event: ForwardedEvent | None = None
    control: str | None = None
    decision: str | None = None
    traceparent: str | None = None

    @classmethod
    def parse(cls, body: Any) -> AgentMessage:
        """``body`` as a message (a body of no known shape keeps only ``body``)."""
        if not isinstance(body, dict):
            return cls(body=body)
        found = body.get(TOPIC_EVENT)
        event: ForwardedEvent | None = None
        if isinstance(found, dict):
            try:
                event = ForwardedEvent.model_validate(found)
            except ValidationError:
                event = None  # not a router's forward: a program's JSON, read as such
        text, control, decision, trace = (
            body.get("text"),
            body.get("control"),
            body.get("decision"),
            body.get(TRACEPARENT),
        )
        return cls(
            body=body,
            text=text if isinstance(text, str) else None,
            untrusted=body.get(UNTRUSTED) is True,
            event=event,
            control=control if isinstance(control, str) else None,
            decision=None if decision is None else str(decision),
            traceparent=trace if isinstance(trace, str) else None,
        )

    @property
    def prompt(self) -> str:
        """The user message of the turn it becomes."""
        if self.event is not None:
            e = self.event
            return json.dumps(
                {"topic": e.topic, "kind": e.kind, "data": e.data, "event": e.id},
                ensure_ascii=False,
                default=str,
            )
        if self.text is not None:
            return self.text
        body = self.body
        return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)

    def identity(self, mail_id: str) -> str:
        """What makes two deliveries one message: the mailbox message id ``mail_id``, or
        for a topic event the event's id (a router that forwards an event again gives it
        a new mailbox id)."""
        return f"event:{self.event.id}" if self.event is not None else mail_id

    def is_outside_content(self, cfg: AgentActorConfig) -> bool:
        """Whether it is outside content: told as untrusted, an event published tainted
        (by a turn or program that had read some), or an event of one of the actor's
        ``untrusted_topics``."""
        if self.event is not None:
            if self.event.tainted:
                return True
            return any(matches(pattern, self.event.topic) for pattern in cfg.untrusted_topics)
        return self.untrusted


__all__ = ["RESUME", "TRACEPARENT", "AgentMessage", "ForwardedEvent"]
