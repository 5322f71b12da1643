"""The decision record: a question a person must answer, stored at ``decisions/<id>``.

A decision is raised open, and closes exactly once: answered by a person, cancelled by
a person, or expired when its ``expires_at`` passes. The record is the single source
of truth; events on the decisions topic only say that it changed.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from plait.errors import DecisionError
from plait.ids import DecisionId, RunId

DecisionKind = Literal["confirm", "choice", "text"]
"""What sort of answer a decision takes.

- ``confirm``: ``yes`` or ``no``.
- ``choice``: one of two or more options.
- ``text``: free text.
"""

DecisionStatus = Literal["open", "answered", "cancelled", "expired"]
"""Where a decision stands.

- ``open``: waiting for a person.
- ``answered``: a person answered; ``answer`` holds it.
- ``cancelled``: a person withdrew the question.
- ``expired``: ``expires_at`` passed with no answer; ``value`` is the default when
  ``on_expire`` is ``"default"``.
"""

OnExpire = Literal["fail", "default"]
"""What an expiry means: ``fail`` (no value) or ``default`` (the default is the value)."""

CONFIRM_OPTIONS = ("yes", "no")
"""The options of every ``confirm`` decision."""


class DecisionAnswer(BaseModel):
    """A person's answer.

    Attributes:
        option: the chosen option (``confirm`` and ``choice``).
        text: the text (``text``), or a note given with an option.
        by: the name of the person who answered (for the CLI, their OS user).
        at: when, in epoch seconds.
        label: the name they gave themselves (``PLAIT_USER``), if any.
    """

    model_config = ConfigDict(frozen=True)

    option: str | None = None
    text: str | None = None
    by: str
    at: float
    label: str | None = None


class Notify(BaseModel):
    """An event published when the decision closes, in the same transaction as the close.

    The durable run layer uses it to wake the run that waits on the decision.

    Attributes:
        topic: the topic to publish on.
        kind: the event kind.
        data: the payload, published unchanged.
    """

    model_config = ConfigDict(frozen=True)

    topic: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    data: dict[str, Any] = Field(default_factory=dict)


class Decision(BaseModel):
    """A question for a person, and where it stands.

    Attributes:
        id: the decision id.
        title: the question, as shown to the person.
        kind: what sort of answer it takes.
        options: ``["yes", "no"]`` for confirm, two or more for choice, none for text.
        status: where it stands.
        answer: the person's answer, once answered.
        default: the value taken on expiry when ``on_expire`` is ``"default"``.
        on_expire: what an expiry means.
        expires_at: when it expires unanswered, in epoch seconds (None: never).
        created_at: when it was raised, in epoch seconds.
        raised_by: the name of the principal that raised it.
        run_id: the run that waits on it, if any.
        node: the node of that run, if any.
        data: free context for the person (for example a budget request).
        notify: an event to publish when it is answered, cancelled or expired.
        closed_by: who answered or cancelled it (None while open or after expiry).
        closed_at: when it closed, in epoch seconds.
    """

    model_config = ConfigDict(frozen=True)

    id: DecisionId = Field(min_length=1)
    title: str
    kind: DecisionKind = "confirm"
    options: list[str] = Field(default_factory=list)
    status: DecisionStatus = "open"
    answer: DecisionAnswer | None = None
    default: str | None = None
    on_expire: OnExpire = "fail"
    expires_at: float | None = None
    created_at: float
    raised_by: str
    run_id: RunId | None = None
    node: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    notify: Notify | None = None
    closed_by: str | None = None
    closed_at: float | None = None

    @model_validator(mode="after")
    def _check_shape(self) -> Decision:
        # The model is frozen; normalising fields while validating needs object.__setattr__.
        if self.kind == "confirm":
            if self.options and [o.lower() for o in self.options] != list(CONFIRM_OPTIONS):
                raise ValueError(
                    f"a confirm decision has the options yes and no, not {self.options}"
                )
            object.__setattr__(self, "options", list(CONFIRM_OPTIONS))
        elif self.kind == "choice":
            if len(self.options) < 2:
                raise ValueError("a choice decision needs at least two options")
            if len(set(self.options)) != len(self.options):
                raise ValueError(f"the options of a choice decision repeat: {self.options}")
            if any(not o for o in self.options):
                raise ValueError("an option must be a non-empty string")
        elif self.options:
            raise ValueError("a text decision takes no options")
        if self.expires_at is not None and not math.isfinite(self.expires_at):
            raise ValueError(f"expires_at must be a finite time, got {self.expires_at}")
        if self.default is not None and self.kind != "text":
            object.__setattr__(self, "default", self.match_option(self.default))
        if self.on_expire == "default" and self.default is None:
            raise ValueError('on_expire="default" needs a default')
        return self

    @property
    def is_open(self) -> bool:
        """True while the decision waits for a person."""
        return self.status == "open"

    @property
    def value(self) -> str | None:
        """The answer's option (else its text), the default after a "default" expiry, or None."""
        if self.answer is not None:
            return self.answer.option if self.answer.option is not None else self.answer.text
        if self.status == "expired" and self.on_expire == "default":
            return self.default
        return None

    def match_option(self, option: str) -> str:
        """The option ``option`` names: exactly, else the one equal ignoring case.

        Raises:
            ValueError: no option (or more than one, ignoring case) matches; the message
                lists the options.
        """
        if option in self.options:
            return option
        folded = [o for o in self.options if o.casefold() == option.strip().casefold()]
        if len(folded) == 1:
            return folded[0]
        raise ValueError(
            f"{option!r} is not an option of decision {self.id}; choose one of "
            + ", ".join(repr(o) for o in self.options)
        )

    def resolve_answer(self, option: str | None, text: str | None) -> tuple[str | None, str | None]:
        """The ``(option, text)`` to record for an answer, checked against the kind.

        A confirm or choice answer needs an option (a confirm takes yes or no in any
        case) and may carry a text note; a text answer needs non-empty text and no option.

        Raises:
            DecisionError: the answer does not fit the decision.
        """
        if self.kind == "text":
            if option is not None:
                raise DecisionError(f"decision {self.id} takes text, not an option")
            if text is None or not text.strip():
                raise DecisionError(f"decision {self.id} needs a non-empty text answer")
            return None, text
        if option is None:
            raise DecisionError(
                f"decision {self.id} needs an option: one of "
                + ", ".join(repr(o) for o in self.options)
            )
        try:
            return self.match_option(option), text
        except ValueError as exc:
            raise DecisionError(str(exc)) from None

    def describe_closed(self) -> str:
        """Why the decision is no longer open, for :class:`~plait.errors.DecisionClosed`."""
        when = iso_time(self.closed_at) if self.closed_at is not None else "an unknown time"
        if self.status == "answered":
            return f"decision {self.id} was already answered by {self.closed_by} at {when}"
        if self.status == "cancelled":
            return f"decision {self.id} was cancelled by {self.closed_by} at {when}"
        if self.status == "expired":
            return f"decision {self.id} expired at {when}"
        return f"decision {self.id} is open"


def iso_time(epoch_s: float) -> str:
    """``epoch_s`` as an ISO 8601 UTC time with seconds, e.g. ``2026-07-21T10:00:00+00:00``."""
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat(timespec="seconds")


__all__ = [
    "CONFIRM_OPTIONS",
    "Decision",
    "DecisionAnswer",
    "DecisionId",
    "DecisionKind",
    "DecisionStatus",
    "Notify",
    "OnExpire",
    "iso_time",
]
