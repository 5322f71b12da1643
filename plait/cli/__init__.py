"""The ``plait`` command: the top room, and a thin one.

Each command parses its arguments, calls the services below (:class:`~plait.runs.Runs`,
:class:`~plait.decisions.DecisionAnswerer`, the graph store, the mesh) and prints what they
return: a table or text for a person, ``--json`` for a program. Run data (model
replies, tool output, asks, answers) is printed as data, never as markup. Nothing
below imports the CLI.

Commands are imported when they are used (``plait --version`` imports none of them, so
it does not pay for Ray, Redis or the graph engine): :data:`COMMANDS` names each top-level
command's module and holds its one-line help, which ``plait --help`` lists; the ``graph``
group does the same for its commands (``plait.cli._graph_app.GRAPH_COMMANDS``).
To add a command group ``plait NAME``:

1. write ``plait/cli/NAME.py`` with ``NAME_app = typer.Typer(help="One line.", ...)`` and
   its commands (``@NAME_app.command("verb")``); heavy imports a single command needs
   may go inside it;
2. add ``"NAME": LazyCommand("plait.cli.NAME", "NAME_app", "One line.")`` to
   :data:`COMMANDS` (``also=(...)`` lists further modules that add commands to the group);
   a top-level command is a function: ``LazyCommand("plait.cli.NAME", "NAME_cmd", ...)``;
3. a command added to ``plait graph`` is a function decorated with
   ``@graph_app.command("verb")`` (``graph_app`` from ``plait.cli._graph_app``, light to
   import) and an entry ``"verb": LazyCommand("plait.cli.MODULE", "verb_cmd", "One
   line.")`` in ``GRAPH_COMMANDS``.

tests/cli/test_lazy_commands.py checks that each table's help is the command's own and
that every command the modules define is in a table. Nothing here imports a command
module at import time.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperOption

from plait.cli._lazy import LazyCommand, lazy_group

COMMANDS = {
    "exec": LazyCommand(
        "plait.cli.programs",
        "exec_cmd",
        "Run a program file in this process (top-level await and return allowed).",
    ),
    "worker": LazyCommand(
        "plait.cli.worker",
        "worker_cmd",
        "Serve every run on the mesh (a dead process's too) until SIGINT or SIGTERM.",
    ),
    "serve": LazyCommand(
        "plait.cli.serve",
        "serve_cmd",
        "Serve the HTTP API and the web console (at /) until SIGINT or SIGTERM.",
    ),
    "mesh": LazyCommand(
        "plait.cli.mesh",
        "mesh_app",
        "Read and write keys of the mesh.",
        also=("plait.cli.topics",),
    ),
    "graph": LazyCommand(
        "plait.cli._graph_app", "graph_app", "Validate, import and inspect graphs."
    ),
    "decisions": LazyCommand(
        "plait.cli.decisions", "decisions_app", "List and answer human decisions."
    ),
    "agents": LazyCommand(
        "plait.cli.agents",
        "agents_app",
        "Agent profiles: model, instructions and tools.",
        also=("plait.cli.agent_actors", "plait.cli.agent_watch"),
    ),
    "tokens": LazyCommand("plait.cli.tokens", "tokens_app", "Create, list and revoke API tokens."),
    "cluster": LazyCommand("plait.cli.cluster", "cluster_app", "The processes serving a mesh."),
    "programs": LazyCommand(
        "plait.cli.programs",
        "programs_app",
        "Saved programs: save, list, show, diff, promote and run them.",
    ),
    "mcp": LazyCommand(
        "plait.cli.mcp",
        "mcp_app",
        "MCP servers: tool sources agents use by name; plait offered as an MCP server.",
    ),
    "workflow": LazyCommand(
        "plait.cli.workflow",
        "workflow_app",
        "Durable Python workflows (@plait.workflow): import, start, list, journal.",
    ),
}
"""Every top-level ``plait`` command: where it is defined and its one-line help."""

_option_type = TyperOption.display_type_rich
_METAVARS = {
    "<str>": "TEXT",
    "<int>": "N",
    "<float>": "NUMBER",
    "<int range>": "N",
    "<float range>": "NUMBER",
}


def _flag_type(self: TyperOption, ctx: Any) -> str | None:
    # A flag takes no value, so help shows no type for it (typer would print <bool>);
    # other values are named as metavars are everywhere else (TEXT, N, not <str>).
    if self.is_flag:
        return None
    shown = _option_type(self, ctx)
    return _METAVARS.get(shown or "", shown)


def _argument_type(self: TyperArgument, ctx: Any) -> str | None:
    # The metavar (RUN, FILE, ID...) already says what an argument is.
    return None


TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]
TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign,assignment]

app = typer.Typer(
    cls=lazy_group(COMMANDS),
    name="plait",
    help="plait: durable agent graphs over a mesh of actors.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(shown: bool) -> None:
    if shown:
        # Imported here: importlib.metadata costs more than the rest of `plait --version`.
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as _installed

        try:
            number = _installed("plait")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        typer.echo(f"plait {number}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print plait's version and exit."
        ),
    ] = False,
) -> None:
    """plait: durable agent graphs over a mesh of actors."""
    _trace_if_asked()


def _trace_if_asked() -> None:
    """Trace every command when ``PLAIT_OTEL`` asks (see :mod:`plait.telemetry.setup`)."""
    if not os.environ.get("PLAIT_OTEL"):
        return  # the common case: no telemetry import on a command's start
    from plait.cli._common import fail
    from plait.errors import ConfigError
    from plait.telemetry import configure, wanted

    if wanted():
        try:
            configure()
        except ConfigError as exc:
            fail(str(exc), 2)


def main() -> None:
    """Entry point of the ``plait`` console script."""
    # As under `python -m`, the working directory's modules import (the function nodes
    # of a Python graph, a worker's --tools), after the installed packages.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    app()


__all__ = ["COMMANDS", "app", "main"]
