"""The decisions a run's owner raises of its own: a budget raise, an interrupted node.

Each id derives from the run and what it is about, so an owner that raises one again
after a crash finds the decision it raised before. Each decision's ``notify`` wakes the
run the moment a person answers. The owner acts as an agent, never as a human.
"""

from __future__ import annotations

import hashlib

from plait.decisions import Agent, DecisionAsker
from plait.graphs import waits
from plait.graphs.state import Attempt
from plait.ids import DecisionId, RunId
from plait.mesh import Mesh
from plait.runs.mesh_ports import decision_id, wake_notify
from plait.runs.record import RunRecord, owner_id


def principal(run_id: str) -> Agent:
    """Who a run's owner acts as: never a human."""
    return Agent(owner_id(run_id))


async def ask_for_budget(board: DecisionAsker, mesh: Mesh, rec: RunRecord) -> None:
    """Raise the decision a run just parked on its budget waits for (set in place)."""
    waiting = rec.waiting
    if waiting is None or waiting.kind != "budget" or waiting.decision_id is not None:
        return
    # Stable for one exhaustion, new after each raise: a raise too small to go on
    # parks the run again on a fresh decision, not on the one just answered.
    raised = ",".join(f"{k}={v:g}" for k, v in sorted(rec.budget_extra.items()))
    did = decision_id(
        rec.run_id,
        "budget",
        "run",
        rec.seq,
        hashlib.sha256(raised.encode()).hexdigest()[:8] if raised else "",
    )
    await board.raise_(
        waiting.ask,
        "choice",
        ["raise", "stop"],
        id=did,
        run_id=rec.run_id,
        node="budget",
        data={"usage": rec.usage.model_dump()},
        notify=wake_notify(mesh, rec.run_id, "budget"),
        by=principal(rec.run_id),
    )
    waiting.decision_id = did


async def ask_to_retry(
    board: DecisionAsker, mesh: Mesh, run_id: RunId, crashed: Attempt
) -> DecisionId:
    """Raise the decision whether to retry ``crashed``, interrupted mid-flight; its id."""
    did = decision_id(run_id, "interrupted", crashed.node, crashed.visit)
    await board.raise_(
        waits.interrupted_ask(crashed),
        "choice",
        ["retry", "fail"],
        id=did,
        run_id=run_id,
        node=crashed.node,
        notify=wake_notify(mesh, run_id, "decision"),
        by=principal(run_id),
    )
    return did


__all__ = ["ask_for_budget", "ask_to_retry", "principal"]
