"""Running ``plait`` in-process through Typer's runner."""

from __future__ import annotations

from typer.testing import CliRunner

from plait.cli import app


def invoke(*args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``plait ARGS``."""
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr
