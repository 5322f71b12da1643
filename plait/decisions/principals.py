"""Who acts: a person or a piece of automation.

Some acts belong to people only: answering or cancelling a decision, raising a budget.
Every such act takes the acting :class:`Principal` and checks it with
:func:`require_human`. The surface handed to models and node code never holds a
:class:`Human`; the CLI makes one for the person at the keyboard
(:meth:`Human.at_terminal`), and refuses to in a process a tool started.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from typing import ClassVar

from plait.errors import ConfigError, NotPermitted
from plait.tools.workspace import TOOL_PROCESS_ENV


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
    """A person: a CLI user or an operator. The only principal that may decide.

    Attributes:
        name: who it is: for the CLI, the OS user of the real uid.
        label: a name the person gave themselves (``PLAIT_USER``), kept beside
            ``name`` and never instead of it.
    """

    label: str | None = None

    kind: ClassVar[str] = "human"

    def __str__(self) -> str:
        own = f"{self.kind} {self.name!r}"
        return own if self.label is None else f"{own} (as {self.label!r})"

    @classmethod
    def at_terminal(cls) -> Human:
        """The person running this process: the OS user of the real uid, labelled
        with ``PLAIT_USER`` if set.

        Raises:
            NotPermitted: this process was started by a tool (it carries
                ``PLAIT_TOOL_PROCESS``): a model's command is not a person.
        """
        if os.environ.get(TOOL_PROCESS_ENV):
            raise NotPermitted(
                f"refused: this process was started by a plait tool ({TOOL_PROCESS_ENV} "
                "is set), and only a person may answer, resume, cancel, retry, fork or raise "
                "a budget, promote a program, manage schedules or create a human token; run "
                "the command from your own shell"
            )
        return cls(os_user(), label=os.environ.get("PLAIT_USER") or None)


@dataclass(frozen=True, slots=True)
class Agent(Principal):
    """Automation: a model, or the code of a node. It may ask, never decide."""

    kind: ClassVar[str] = "agent"


def os_user() -> str:
    """The login name of this process's real uid (its uid as text if it has none).

    Unlike ``getpass.getuser()`` it reads no environment variable, so no one can claim
    to be someone else by setting ``USER``.
    """
    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a container user with no passwd entry
        return f"uid {uid}"


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


__all__ = ["Agent", "Human", "Principal", "os_user", "require_human"]
