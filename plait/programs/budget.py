"""A budget shared by a program and every program it runs, however deeply nested."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from plait.errors import BudgetExhausted


@dataclass
class SharedBudget:
    """What a program run and its nested runs may still spend, together.

    One object is handed down to every nested run, so a child spends from its
    caller's budget and never from a fresh one. None means unlimited.

    Attributes:
        steps: program runs and tool calls allowed in all.
        tokens: model tokens allowed in all.
        dollars: model spend allowed in all.
        wall_seconds: seconds since the outermost run started.
        used_steps, used_tokens, used_dollars: what has been spent so far.
    """

    steps: int | None = None
    tokens: int | None = None
    dollars: float | None = None
    wall_seconds: float | None = None
    used_steps: int = 0
    used_tokens: int = 0
    used_dollars: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def step(self, where: str, what: str) -> None:
        """Count one step (a program run, a tool call) made at ``where``.

        Raises:
            BudgetExhausted: a limit is already reached; the step is not counted.
        """
        self.check(where, what)
        if self.steps is not None and self.used_steps >= self.steps:
            raise BudgetExhausted(where, what, f"{self.steps} step(s) allowed, all used")
        self.used_steps += 1

    def spend(self, *, tokens: int = 0, dollars: float = 0.0) -> None:
        """Record model spend (checked before the next step)."""
        self.used_tokens += tokens
        self.used_dollars += dollars

    def check(self, where: str, what: str) -> None:
        """Refuse ``what`` if any limit but steps is reached.

        Raises:
            BudgetExhausted: the tokens, dollars or wall seconds are spent.
        """
        if self.tokens is not None and self.used_tokens >= self.tokens:
            raise BudgetExhausted(where, what, f"{self.tokens} token(s) allowed, all used")
        if self.dollars is not None and self.used_dollars >= self.dollars:
            raise BudgetExhausted(where, what, f"${self.dollars:g} allowed, all spent")
        elapsed = time.monotonic() - self.started
        if self.wall_seconds is not None and elapsed >= self.wall_seconds:
            raise BudgetExhausted(
                where, what, f"{self.wall_seconds:g} wall second(s) allowed, {elapsed:.1f} passed"
            )


__all__ = ["SharedBudget"]
