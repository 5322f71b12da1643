"""The MCP servers the tests use, none written here: two from npm, two from PyPI.

The npm ones (``@modelcontextprotocol/server-everything`` and ``server-filesystem``) are
installed once per session into a cache directory (``PLAIT_TEST_NPM_DIR``, default
``~/.cache/plait-tests/npm``; ``.ci/run`` installs them ahead); a test needing one skips,
saying why, when npm or its registry cannot be reached. The PyPI ones
(``mcp-server-time``, ``mcp-server-git``) come with the dev install.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support.timing import scaled

NPM_PACKAGES = (
    "@modelcontextprotocol/server-everything",
    "@modelcontextprotocol/server-filesystem",
)
"""What :func:`npm_bin` installs."""

BIN = Path(sys.executable).parent

CLOCK_GRAPH = """
name: now
agent: clock
entry: ask
nodes:
  - id: ask
    type: tool
    tool: time.get_current_time
    args: {timezone: UTC}
"""
"""A graph of agent ``clock`` calling ``mcp-server-time`` (declared as ``time``)."""


def npm_dir() -> Path:
    """Where the npm servers are installed."""
    found = os.environ.get("PLAIT_TEST_NPM_DIR")
    return Path(found) if found else Path.home() / ".cache" / "plait-tests" / "npm"


@functools.cache
def _installed() -> str | None:
    """None once the npm servers are installed; else why they cannot be."""
    where = npm_dir()
    if all((where / "node_modules" / ".bin" / b).exists() for b in _BINS):
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed"
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(where), *NPM_PACKAGES],
            capture_output=True, text=True, timeout=scaled(300), check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "npm install timed out (is the npm registry reachable?)"
    if done.returncode != 0:
        return f"npm install failed (is the npm registry reachable?): {done.stderr[-300:]}"
    return None


_BINS = ("mcp-server-everything", "mcp-server-filesystem")


def npm_bin(name: str) -> Path:
    """The path of npm server binary ``name``, installing the servers first; skips the
    test, saying why, when npm cannot install them."""
    why = _installed()
    if why is not None:
        pytest.skip(f"the npm MCP servers are not available: {why}")
    return npm_dir() / "node_modules" / ".bin" / name


def everything() -> list[str]:
    """The command of ``@modelcontextprotocol/server-everything`` over stdio."""
    return [str(npm_bin("mcp-server-everything")), "stdio"]


def filesystem() -> list[str]:
    """The command of the filesystem server confined to the calling run's workspace."""
    return [str(npm_bin("mcp-server-filesystem")), "{workspace}"]


def time_server() -> list[str]:
    """The command of ``mcp-server-time``."""
    return [str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]


def git_server(repo: Path) -> list[str]:
    """The command of ``mcp-server-git`` on ``repo``."""
    return [str(BIN / "mcp-server-git"), "--repository", str(repo)]


def with_pid_file(command: list[str], pid_file: Path) -> list[str]:
    """``command`` run through ``sh`` that first writes its pid to ``pid_file`` (the
    server keeps that pid: ``exec``), so a test can kill it."""
    quoted = " ".join(f"'{a}'" for a in command)
    return ["sh", "-c", f"echo $$ > '{pid_file}'; exec {quoted}"]
