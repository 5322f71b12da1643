"""Where tools work and what they inherit: the workspace, its guarded paths, the environment.

A tool works in a workspace: the agent profile's ``workspace``, resolved against the
directory the run was started from (pinned in the run record, so every worker uses the
same). File tools stay inside it and never touch ``.plait/`` or the mesh's own files;
processes a tool starts get a scrubbed environment holding no mesh credentials and the
marker :data:`TOOL_PROCESS_ENV`, under which the human-only CLI commands refuse to run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from plait.errors import ToolError, ToolNotPermitted
from plait.profiles import AgentProfile

TOOL_PROCESS_ENV = "PLAIT_TOOL_PROCESS"
"""Set to ``1`` in every process a tool starts; the human-only commands refuse under it."""

BASE_ENV = ("PATH", "LANG", "HOME")
"""The environment variables every tool process gets from the worker (if set)."""

STATE_DIR = ".plait"
"""The directory name of plait's own state (the default SQLite mesh lives in one)."""


def workspace_of(profile: AgentProfile | None, started_in: Path) -> Path:
    """The directory ``profile``'s tools work in: its ``workspace`` or ``started_in``."""
    base = started_in.absolute()
    if profile is None or not profile.workspace:
        return base
    return base / Path(profile.workspace).expanduser()


def tool_env(profile: AgentProfile | None) -> dict[str, str]:
    """The environment of a process a tool starts: the allow-list, the profile's names,
    and the tool-process marker; nothing else of the worker's environment."""
    names = (*BASE_ENV, *(profile.tool_env if profile else ()))
    env = {n: os.environ[n] for n in names if n in os.environ}
    env[TOOL_PROCESS_ENV] = "1"
    return env


def guarded_path(tool: str, raw: str, workspace: Path, protected: Iterable[Path]) -> Path:
    """The resolved path ``raw`` names for a file tool, checked.

    Relative paths resolve against ``workspace``; the result (symlinks followed) must
    stay inside it, name nothing under a ``.plait`` directory and none of ``protected``.

    Raises:
        ToolNotPermitted: the path leaves the workspace or names plait's own files.
    """
    base = workspace.resolve()
    path = (base / raw).resolve()
    if not path.is_relative_to(base):
        raise ToolNotPermitted(
            f"tool {tool!r}: {raw!r} is outside the working directory {str(base)!r}"
        )
    guarded = {p.resolve() for p in protected}
    if STATE_DIR in path.relative_to(base).parts or path in guarded:
        raise ToolNotPermitted(
            f"tool {tool!r}: {raw!r} is plait's own state ({STATE_DIR}/ or the mesh "
            "files), which tools may not read"
        )
    return path


def bwrap_argv(
    command: str, workspace: Path, protected: Iterable[Path], *, network: bool
) -> list[str]:
    """The argv running ``command`` under bubblewrap in ``workspace``.

    The root file system is read-only, the workspace the one writable directory, every
    ``.plait`` directory from the workspace up (and any holding a mesh file) an empty
    tmpfs, and each mesh file elsewhere ``/dev/null``; without ``network`` the command has no
    network at all.

    Raises:
        ToolError: bubblewrap is not installed.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ToolError(
            "tool 'bash': the agent profile asks for sandbox: bwrap, but bwrap is not "
            "installed (apt-get install bubblewrap, or drop the profile's sandbox)"
        )
    ws = workspace.resolve()
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += ["--tmpfs", "/tmp", "--bind", str(ws), str(ws)]
    hidden = [d / STATE_DIR for d in (ws, *ws.parents)]
    files: list[Path] = []
    for f in (p.resolve() for p in protected):
        if f.parent.name == STATE_DIR:
            hidden.append(f.parent)
        else:
            files.append(f)
    for d in dict.fromkeys(hidden):
        if d.is_dir():
            argv += ["--tmpfs", str(d)]
    for f in files:
        if f.exists():
            argv += ["--ro-bind", "/dev/null", str(f)]
    argv += ["--unshare-all", "--die-with-parent", "--chdir", str(ws)]
    if network:
        argv.append("--share-net")
    return [*argv, "/bin/sh", "-c", command]


__all__ = [
    "BASE_ENV",
    "STATE_DIR",
    "TOOL_PROCESS_ENV",
    "bwrap_argv",
    "guarded_path",
    "tool_env",
    "workspace_of",
]
