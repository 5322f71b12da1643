"""The ``plait graph`` group: its commands by name, each imported when it is used.

The commands are defined across several modules (``graph``, ``runs``, ``run_views``,
``rerun``, ``schedules``), each decorating :data:`graph_app`; :data:`GRAPH_COMMANDS` says
where each one lives, so ``plait graph runs`` imports the run views and not the run
starter, the graph validator or the scheduler.
"""

from __future__ import annotations

import typer

from plait.cli._lazy import LazyCommand, lazy_group

_GRAPH = "plait.cli.graph"
_RUNS = "plait.cli.runs"
_VIEWS = "plait.cli.run_views"
_RERUN = "plait.cli.rerun"
_SCHEDULES = "plait.cli.schedules"

GRAPH_COMMANDS = {
    "validate": LazyCommand(
        _GRAPH,
        "validate",
        "Check FILE and list every problem with its path (exit 1 if there is any).",
    ),
    "import": LazyCommand(
        _GRAPH,
        "import_",
        "Validate FILE and store it as its agent's graph, at the version it names.",
    ),
    "list": LazyCommand(
        _GRAPH, "list_", "List stored graphs with their newest version and every version."
    ),
    "show": LazyCommand(
        _GRAPH,
        "show",
        "Print a stored graph: its spec as JSON, or a Mermaid flowchart with --mermaid.",
    ),
    "schema": LazyCommand(
        _GRAPH,
        "schema",
        'Print the JSON Schema of graph files (point a file\'s "$schema" at it).',
    ),
    "run": LazyCommand(
        _RUNS,
        "run_graph_cmd",
        "Start a durable run of a stored graph and follow it until it settles.",
    ),
    "resume": LazyCommand(
        _RUNS,
        "resume_cmd",
        "Answer what a waiting run asks, then follow it until it settles again.",
    ),
    "raise-budget": LazyCommand(
        _RUNS,
        "raise_budget_cmd",
        "Raise a run's budget (a person only); a run parked on its budget goes on.",
    ),
    "cancel": LazyCommand(
        _RUNS,
        "cancel_cmd",
        "Cancel a run: nothing of it runs again. Exits 1 if the run was already over.",
    ),
    "prune": LazyCommand(
        _RUNS,
        "prune_cmd",
        "Delete finished runs (done, failed, cancelled) and everything they stored.",
    ),
    "retry": LazyCommand(
        _RERUN,
        "retry_cmd",
        "Continue a failed run from the node that failed, on its pinned graph version.",
    ),
    "fork": LazyCommand(
        _RERUN, "fork_cmd", "Start a new run from the state after a committed visit of RUN."
    ),
    "runs": LazyCommand(
        "plait.cli.run_list", "runs_cmd", "List runs, newest first, including parked ones."
    ),
    "inspect": LazyCommand(
        _VIEWS,
        "inspect_cmd",
        "Show a run's history: per visit its status, time, verdict, tools, usage, answers.",
    ),
    "events": LazyCommand(
        _VIEWS,
        "events_cmd",
        "Print a run's audit chain: every committed transition, oldest first.",
    ),
    "schedule": LazyCommand(
        _SCHEDULES,
        "schedule_cmd",
        "Run AGENT/NAME on a cron schedule; each run's result goes to --deliver when it ends.",
    ),
    "schedules": LazyCommand(
        _SCHEDULES,
        "schedules_cmd",
        "List schedules: id, graph, next fire, skipped fires and last error.",
    ),
    "unschedule": LazyCommand(_SCHEDULES, "unschedule_cmd", "Delete a schedule: it fires no more."),
    "schedule-pause": LazyCommand(
        _SCHEDULES,
        "pause_cmd",
        "Pause a schedule: nothing fires until schedule-resume (those fires are skipped).",
    ),
    "schedule-resume": LazyCommand(
        _SCHEDULES, "resume_cmd", "Resume a paused schedule from its next fire time."
    ),
    "watch": LazyCommand(
        "plait.cli.run_watch",
        "watch_cmd",
        "Follow a run as it happens: its models' replies token by token, each attempt and "
        "commit, until it is done, failed, cancelled or waits on a person.",
    ),
}
"""Every ``plait graph`` command: where it is defined and its one-line help."""

graph_app = typer.Typer(
    cls=lazy_group(GRAPH_COMMANDS),
    help="Validate, import and inspect graphs.",
    no_args_is_help=True,
)
"""The ``plait graph`` group; its modules decorate it (``@graph_app.command("NAME")``)."""
