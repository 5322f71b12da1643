"""What an executor reports about one node visit: :class:`NodeResult`.

Below the engine and the node kinds alike: a kind's executor builds one, the engine
applies it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from plait.graphs.state import Waiting


@dataclass(slots=True)
class NodeResult:
    """What an executor reports about one node visit.

    Attributes:
        value: the node's output.
        error: set when the node failed; ``detail`` may name the reason code
            (``"tool_execution_failed"``), which becomes the run's ``ended_detail``.
        retryable: the error is transient (a rate limit, a 5xx, a timeout): the node
            is tried again under its ``retry`` policy.
        verdict: a verifier's verdict word (already checked against its verdicts).
        input_tokens, output_tokens, dollars: what the visit spent.
        prompt: the rendered prompt (for the trajectory and audit).
        tainted: the output carries outside content.
        waiting: set when the node parks the run (a decision or approval is open).
        items: for a fan-out node, the list each ``map`` target fans out over.
        history: an agent node's conversation after this visit, for its next visit
            (the runner stores it; the engine ignores it).
        started_at, ended_at: epoch seconds.
    """

    value: Any = None
    error: str | None = None
    detail: str | None = None
    retryable: bool = False
    verdict: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0
    prompt: str | None = None
    tainted: bool = False
    waiting: Waiting | None = None
    items: dict[str, list[Any]] = field(default_factory=dict)
    history: list[Any] | None = None
    started_at: float = 0.0
    ended_at: float = 0.0


__all__ = ["NodeResult"]
