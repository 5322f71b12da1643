"""The ``plait`` command: the top room, and a thin one.

Each command parses its arguments, calls the services below (:class:`~plait.runs.Runs`,
:class:`~plait.decisions.DecisionAnswerer`, the graph store, the mesh) and prints what they
return: a table or text for a person, ``--json`` for a program. Run data (model
replies, tool output, asks, answers) is printed as data, never as markup. Nothing
below imports the CLI.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _installed
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperOption

from plait.cli import agent_actors as _agent_actors  # noqa: F401  -- agents list|show|start...
from plait.cli import rerun as _rerun  # noqa: F401  -- and retry and fork
from plait.cli import run_views as _run_views  # noqa: F401  -- and runs, inspect, events
from plait.cli import run_watch as _run_watch  # noqa: F401  -- and graph watch
from plait.cli import runs as _runs  # noqa: F401  -- registers the run commands on graph_app
from plait.cli import schedules as _schedules  # noqa: F401  -- the schedule commands too
from plait.cli import topics as _topics  # noqa: F401  -- mesh publish|tail on mesh_app
from plait.cli.agents import agents_app
from plait.cli.cluster import cluster_app
from plait.cli.decisions import decisions_app
from plait.cli.graph import graph_app
from plait.cli.mesh import mesh_app
from plait.cli.programs import exec_cmd, programs_app
from plait.cli.serve import serve_cmd
from plait.cli.tokens import tokens_app
from plait.cli.worker import worker_cmd

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
    name="plait",
    help="plait: durable agent graphs over a mesh of actors.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(shown: bool) -> None:
    if shown:
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


app.add_typer(mesh_app, name="mesh")
app.add_typer(graph_app, name="graph")
app.add_typer(decisions_app, name="decisions")
app.add_typer(agents_app, name="agents")
app.add_typer(tokens_app, name="tokens")
app.add_typer(cluster_app, name="cluster")
app.add_typer(programs_app, name="programs")
app.command("exec")(exec_cmd)
app.command("worker")(worker_cmd)
app.command("serve")(serve_cmd)


def main() -> None:
    """Entry point of the ``plait`` console script."""
    # As under `python -m`, the working directory's modules import (the function nodes
    # of a Python graph, a worker's --tools), after the installed packages.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    app()


__all__ = ["app", "main"]
