"""The budget contract model turns spend from, and the budget of program runs.

:class:`CallBudget` is the one contract: whatever runs a model call or a tool call
(an agent turn, a program's ``tools.call``) asks its budget first and reports the
spend after. A node visit's budget (:class:`plait.graphs.budget.VisitBudget`) keeps it,
and so does :class:`SharedBudget`, the budget of a program run and every run nested in
it. A program run by a node visit spends ``within`` that visit's budget: every check
asks both, every spend counts in both, so ``agents.run`` from a program stops where
the run's ``budget.tokens`` does, and the run's record counts what it spent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from plait.errors import BudgetExhausted
from plait.models import Usage


class CallBudget(Protocol):
    """What a model or tool call is checked against before it is made, and charged to.

    Each method raises :class:`~plait.errors.BudgetExhausted` when the call would
    pass a limit; the call is then not made.
    """

    def check(self, what: str) -> None:
        """Refuse ``what`` (a tool call, a program run) once a limit is spent."""
        ...

    async def begin_model_call(self) -> None:
        """Take a place for one model call, or refuse it (pair with :meth:`end_model_call`)."""
        ...

    def end_model_call(self) -> None:
        """Give back the place :meth:`begin_model_call` took."""
        ...

    def spend(self, usage: Usage, dollars: float) -> None:
        """Count one model call's cost (between begin and end)."""
        ...


@dataclass
class SharedBudget:
    """What a program run and its nested runs may still spend, together.

    One object is handed down to every nested run, so a child spends from its
    caller's budget and never from a fresh one. None means unlimited. It keeps the
    :class:`CallBudget` contract, so an agent turn a program runs (``agents.run``)
    spends from it.

    Attributes:
        steps: program runs and tool calls allowed in all.
        tokens: model tokens allowed in all.
        dollars: model spend allowed in all.
        wall_seconds: seconds since the outermost run started.
        within: the caller's budget this one also spends from and is checked against
            (a node visit's), or None.
        node: where its refusals say they happened.
        used_steps, used_tokens, used_dollars: what has been spent so far.
    """

    steps: int | None = None
    tokens: int | None = None
    dollars: float | None = None
    wall_seconds: float | None = None
    within: CallBudget | None = field(default=None, repr=False)
    node: str = "program"
    used_steps: int = 0
    used_tokens: int = 0
    used_dollars: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def step(self, where: str, what: str) -> None:
        """Count one step (a program run, a tool call) made at ``where``.

        Raises:
            BudgetExhausted: a limit is already reached; the step is not counted.
        """
        self.check(what, where)
        if self.steps is not None and self.used_steps >= self.steps:
            raise BudgetExhausted(where, what, f"{self.steps} step(s) allowed, all used")
        self.used_steps += 1

    def check(self, what: str, where: str | None = None) -> None:
        """Refuse ``what`` if any limit but steps is reached, here or ``within``.

        Raises:
            BudgetExhausted: the tokens, dollars or wall seconds are spent.
        """
        where = where or self.node
        if self.tokens is not None and self.used_tokens >= self.tokens:
            raise BudgetExhausted(where, what, f"{self.tokens} token(s) allowed, all used")
        if self.dollars is not None and self.used_dollars >= self.dollars:
            raise BudgetExhausted(where, what, f"${self.dollars:g} allowed, all spent")
        elapsed = time.monotonic() - self.started
        if self.wall_seconds is not None and elapsed >= self.wall_seconds:
            raise BudgetExhausted(
                where, what, f"{self.wall_seconds:g} wall second(s) allowed, {elapsed:.1f} passed"
            )
        if self.within is not None:
            self.within.check(what)

    async def begin_model_call(self) -> None:
        """Refuse a model call past this budget's limits, then take a place ``within``."""
        self.check("model call")
        if self.within is not None:
            await self.within.begin_model_call()

    def end_model_call(self) -> None:
        """Give back the place :meth:`begin_model_call` took ``within``."""
        if self.within is not None:
            self.within.end_model_call()

    def spend(self, usage: Usage, dollars: float) -> None:
        """Count one model call's cost here and ``within``."""
        self.used_tokens += usage.input_tokens + usage.output_tokens
        self.used_dollars += dollars
        if self.within is not None:
            self.within.spend(usage, dollars)


__all__ = ["CallBudget", "SharedBudget"]
