"""The ``plait`` command."""

from __future__ import annotations

import typer

from plait.cli import runs as _runs  # noqa: F401  -- registers the run commands on graph_app
from plait.cli.decisions import decisions_app
from plait.cli.graph import graph_app
from plait.cli.mesh import mesh_app
from plait.cli.worker import worker_cmd

app = typer.Typer(
    name="plait",
    help="plait: durable agent graphs over a mesh of actors.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(mesh_app, name="mesh")
app.add_typer(graph_app, name="graph")
app.add_typer(decisions_app, name="decisions")
app.command("worker")(worker_cmd)


def main() -> None:
    """Entry point of the ``plait`` console script."""
    app()


__all__ = ["app", "main"]
