"""Durable Python workflows: an async function journaled step by step.

``@plait.workflow`` makes ``async def fn(ctx: plait.Context, ...)`` a workflow: every
call through ``ctx`` (tools, agent turns, programs, decisions, the mesh, sleeps, the
clock, random draws and ids) and every ``@plait.step`` is a step whose result is
committed to the run's log before the workflow goes on. A run is a durable run of a
graph of one ``workflow`` node (:mod:`plait.graphs.nodes.workflow`) visiting itself
once per batch of steps; each visit runs the function from the top, replaying what the
journal holds (:mod:`plait.workflows.replay`).

::

    plait/workflows/journal.py    entries, the journal read from a run's log, its cache
    plait/workflows/replay.py     one visit: positions, replay, the batch, step policies
    plait/workflows/context.py    Context: what the code calls, each call a step
    plait/workflows/workflow.py   @workflow, @step, a visit, the in-session run
    plait/workflows/gather.py     plait.gather: journaled steps answer in place
    plait/workflows/store.py      import, start, journal, stale runs
"""

from __future__ import annotations

from plait.workflows.context import Answered, Context
from plait.workflows.gather import gather
from plait.workflows.journal import Entry, read_journal
from plait.workflows.replay import StepPolicy
from plait.workflows.store import (
    import_workflow,
    journal,
    load_workflow,
    stale_runs,
    start_workflow,
)
from plait.workflows.workflow import (
    NODE,
    SessionAnswers,
    Step,
    Workflow,
    run_session,
    source_sha256,
    step,
    workflow,
)

__all__ = [
    "NODE",
    "Answered",
    "Context",
    "Entry",
    "SessionAnswers",
    "Step",
    "StepPolicy",
    "Workflow",
    "gather",
    "import_workflow",
    "journal",
    "load_workflow",
    "read_journal",
    "run_session",
    "source_sha256",
    "stale_runs",
    "start_workflow",
    "step",
    "workflow",
]
