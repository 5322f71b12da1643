"""Who acts: a person or a piece of automation.

Some acts belong to people only: answering or cancelling a decision, raising a budget.
Every such act takes the acting :class:`Principal` and checks it with
:func:`require_human`. The surface handed to models and node code never holds a
:class:`Human`; the CLI and an operator's tools make one for the person at the keyboard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from plait.errors import ConfigError, NotPermitted


@dataclass(frozen=True, slots=True)
class Principal:
    """Someone or something that acts on plait.

    Attributes:
        name: who it is (a user name, an operator id, an agent or node id).
    """

    name: str

    kind: ClassVar[str] = "principal"
    """A short word for the sort of principal, used in messages."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"a {self.kind} needs a non-empty name, got {self.name!r}")

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r}"


@dataclass(frozen=True, slots=True)
class Human(Principal):
    """A person: a CLI user or an operator. The only principal that may decide."""

    kind: ClassVar[str] = "human"


@dataclass(frozen=True, slots=True)
class Agent(Principal):
    """Automation: a model, or the code of a node. It may ask, never decide."""

    kind: ClassVar[str] = "agent"


def require_human(principal: Principal, action: str) -> Human:
    """Return ``principal`` if it is a :class:`Human`, else refuse.

    Args:
        principal: who is acting.
        action: what they try to do, for the message (``"answer a decision"``).

    Raises:
        NotPermitted: ``principal`` is not a human.
    """
    if isinstance(principal, Human):
        return principal
    raise NotPermitted(f"only a human may {action}; {principal} is not one")


__all__ = ["Agent", "Human", "Principal", "require_human"]
