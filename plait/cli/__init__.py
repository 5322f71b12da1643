"""The ``plait`` command."""

from __future__ import annotations

import typer

from plait.cli.graph import graph_app
from plait.cli.mesh import mesh_app

app = typer.Typer(
    name="plait",
    help="plait: durable agent graphs over a mesh of actors.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(mesh_app, name="mesh")
app.add_typer(graph_app, name="graph")


def main() -> None:
    """Entry point of the ``plait`` console script."""
    app()


__all__ = ["app", "main"]
