"""The budget a visit may still spend, checked before every model and tool call.

A run's budget (tokens, dollars, wall seconds) is checked by the engine between
visits; inside one visit, :class:`VisitBudget` holds what is left and is shared by the
visit's concurrent tasks (a parallel node's workers), so a visit cannot run on past its
limits. A model call is made only if the calls already in flight plus one more, each
costed at the dearest call seen so far, still fit; until one call has been measured,
calls go one at a time. A call that would not fit is not made: the visit ends as
budget-exhausted, and the run parks (or fails) on its budget as between visits.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from plait.errors import BudgetExhausted
from plait.graphs.result import NodeResult
from plait.graphs.state import RunUsage
from plait.models import Usage


@dataclass
class VisitBudget:
    """What one visit may still spend, and what it has spent so far.

    Attributes:
        tokens, dollars: what is left of the run's limits when the visit started
            (None: no limit).
        deadline: the ``clock()`` time at which the wall-seconds budget runs out.
        node: the visit's key, for messages.
        input_tokens, output_tokens, spent_dollars: what this visit has spent.
    """

    tokens: float | None = None
    dollars: float | None = None
    deadline: float | None = None
    node: str = ""
    clock: Callable[[], float] = time.monotonic
    input_tokens: int = 0
    output_tokens: int = 0
    spent_dollars: float = 0.0
    _per_call_tokens: int | None = None
    _per_call_dollars: float = 0.0
    _in_flight: int = 0
    _measured: anyio.Event | None = field(default=None, repr=False)

    @classmethod
    def of(cls, limits: Mapping[str, float | None], usage: RunUsage, node: str) -> VisitBudget:
        """The budget left to a visit of ``node`` by a run with ``limits`` and ``usage``."""
        tokens, dollars = limits.get("tokens"), limits.get("dollars")
        wall = limits.get("wall_seconds")
        clock = time.monotonic
        return cls(
            tokens=None if tokens is None else tokens - usage.tokens,
            dollars=None if dollars is None else dollars - usage.dollars,
            deadline=None if wall is None else clock() + wall - usage.wall_seconds,
            node=node,
            clock=clock,
        )

    def _refuse(self, what: str, reason: str) -> BudgetExhausted:
        return BudgetExhausted(self.node, what, reason)

    def check_time(self, what: str) -> None:
        """Refuse ``what`` once the wall-seconds budget has run out."""
        if self.deadline is not None and self.clock() >= self.deadline:
            raise self._refuse(what, "wall_seconds: the run's time is up")

    def check_tool(self, name: str) -> None:
        """Refuse a tool call once any budget is spent (a tool call costs no tokens)."""
        self.check(f"tool call {name!r}")

    def check(self, what: str) -> None:
        """Refuse ``what`` (a call that costs no tokens itself) once any budget is spent;
        the :class:`~plait.programs.CallBudget` check a program run makes."""
        self.check_time(what)
        if self.tokens is not None and self.input_tokens + self.output_tokens > self.tokens:
            raise self._refuse(what, f"tokens: the run's limit leaves {self.tokens:g}")
        if self.dollars is not None and self.spent_dollars > self.dollars:
            raise self._refuse(what, f"dollars: the run's limit leaves {self.dollars:g}")

    @asynccontextmanager
    async def model_call(self) -> AsyncIterator[None]:
        """Hold a place for one model call, or raise BudgetExhausted if it would not fit."""
        await self.begin_model_call()
        try:
            yield
        finally:
            self.end_model_call()

    async def begin_model_call(self) -> None:
        """Take a place for one model call (pair it with :meth:`end_model_call` in a
        ``finally``), or raise BudgetExhausted if it would not fit.

        :meth:`model_call` is the same as a context manager; the model loop calls these
        two itself, which spares it a generator-based context manager per call.
        """
        while self._per_call_tokens is None and self._in_flight:
            # Nothing measured yet: one call at a time, so N workers cannot all start
            # on a budget that fits one call.
            if self._measured is None:
                self._measured = anyio.Event()
            await self._measured.wait()
        self._reserve()
        self._in_flight += 1

    def end_model_call(self) -> None:
        """Give back the place :meth:`begin_model_call` took."""
        self._in_flight -= 1
        if self._measured is not None:
            self._measured.set()
            self._measured = None

    def _reserve(self) -> None:
        what = "model call"
        self.check_time(what)
        calls = self._in_flight + 1
        spent = self.input_tokens + self.output_tokens
        if self.tokens is not None:
            need = spent + calls * (self._per_call_tokens or 1)
            if need > self.tokens:
                raise self._refuse(
                    what, f"tokens: {spent} spent in this visit, {self.tokens:g} were left"
                )
        if self.dollars is not None:
            need_d = self.spent_dollars + calls * self._per_call_dollars
            if need_d > self.dollars:
                raise self._refuse(
                    what,
                    f"dollars: {self.spent_dollars:g} spent in this visit, "
                    f"{self.dollars:g} were left",
                )

    def charge(self, result: NodeResult) -> NodeResult:
        """``result`` with what this visit has spent (a visit that spent through
        others, a program's ``agents.run``, or one that failed part way)."""
        result.input_tokens, result.output_tokens = self.input_tokens, self.output_tokens
        result.dollars = self.spent_dollars
        return result

    def spend(self, usage: Usage, dollars: float) -> None:
        """Count one model call's cost (called inside :meth:`model_call`)."""
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.spent_dollars += dollars
        cost = usage.input_tokens + usage.output_tokens
        self._per_call_tokens = max(self._per_call_tokens or 0, cost)
        self._per_call_dollars = max(self._per_call_dollars, dollars)


__all__ = ["VisitBudget"]
