"""Starting a pool's zygote: its isolation, its children's limits and workspaces, its channel.

The zygote (:mod:`.zygote`) is the one process a pool starts from scratch; every program
runs in a child it forks, which lowers its own limits, makes its own workspace (under
the zygote's workspace directory: searchable, not listable) and drops to ``nobody``.
Under bubblewrap the children of one zygote share its namespaces (one sandbox, many
programs in it, each as its own process); the audit hook keeps each to its workspace
and its own ``/proc`` entry.

Two isolations, chosen once per pool:

``bwrap``
    bubblewrap: new user, PID, network, IPC and UTS namespaces (the program runs as
    ``nobody`` and sees no other process and no network), a read-only bind of the
    Python install and ``/usr`` only (no ``/home``, ``/root``, ``/work``, ``/etc``),
    a private ``/tmp``, and the workspaces the one writable directory.
``rlimits``
    the weaker mode where bubblewrap is missing or cannot run: the same resource
    limits, scrubbed environment, workspace and audit hook, with the serving process's
    file system and process table in view; as root the program still runs as
    ``nobody``, so the serving process's ``/proc`` entries and private files are closed
    to it. The pool logs a warning when it falls back to this mode.

Either way the environment is scrubbed (``PATH``, ``LANG``, ``HOME``, ``TMPDIR`` only:
no ``PLAIT_*``, no mesh URL, no tokens; a child's ``HOME`` and ``TMPDIR`` are its
workspace) and a child gets one end of a socket pair as its only channel to the serving
process.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from plait.errors import ProgramError

log = logging.getLogger(__name__)

Isolation = Literal["bwrap", "rlimits"]
"""``bwrap``: bubblewrap namespaces and the limits; ``rlimits``: the limits only."""

HEADER = struct.Struct(">I")
"""A frame's length prefix (4 bytes, big-endian) before its body."""

NOBODY = 65534
"""The uid and gid a program runs as, when the serving process may choose (root)."""

INSIDE_WORKSPACE = "/workspace"
"""Where the workspace is mounted under bubblewrap."""

_STUB = (Path(__file__).parent / "stub.py").read_text(encoding="utf-8")


@dataclass(frozen=True)
class SandboxLimits:
    """The resource limits of one sandboxed program.

    Attributes:
        cpu_seconds: CPU time (RLIMIT_CPU); past it the kernel ends the process.
        memory_bytes: address space (RLIMIT_AS); an allocation past it fails.
        processes: processes and threads (RLIMIT_NPROC, per sandbox under bubblewrap).
        file_bytes: the largest file it may write (RLIMIT_FSIZE).
        open_files: open file descriptors (RLIMIT_NOFILE).
        wall_seconds: wall-clock time the serving process waits before killing it.
    """

    cpu_seconds: int = 60
    memory_bytes: int = 1 << 30
    processes: int = 64
    file_bytes: int = 64 << 20
    open_files: int = 256
    wall_seconds: float = 3600.0


def bwrap_usable() -> str | None:
    """Why bubblewrap cannot isolate programs here (None if it can)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    argv = _bwrap_prefix(bwrap, Path(tempfile.gettempdir()))
    try:
        probe = subprocess.run(
            [*argv, "true"],
            capture_output=True,
            text=True,
            timeout=30,
            env=_env("/tmp", "/tmp"),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot run here: {exc}"
    if probe.returncode != 0:
        return f"bwrap cannot run here: {probe.stderr.strip() or probe.returncode}"
    return None


def start_zygote(
    limits: SandboxLimits, isolation: Isolation
) -> tuple[subprocess.Popen[bytes], socket.socket, Path]:
    """Start one zygote process (its interpreter, the stub imported, under bubblewrap in
    that mode): its process, the serving end of its control channel (a ``SOCK_SEQPACKET``
    pair: one JSON message each, a child's channel passed with ``SCM_RIGHTS``), and the
    directory its children's workspaces are made in. It says ready on the channel.

    Raises:
        ProgramError: the process did not start.
    """
    root = Path(tempfile.mkdtemp(prefix="plait-programs-"))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    as_root = os.geteuid() == 0
    try:
        config: dict[str, object] = {**asdict(limits), "readable": [], "writable": []}
        if isolation == "bwrap":
            bwrap = shutil.which("bwrap")
            if bwrap is None:
                raise ProgramError("bwrap is not installed (apt-get install bubblewrap)")
            if as_root:
                config["drop_to"] = NOBODY
            config["workspaces"] = INSIDE_WORKSPACE
            argv = [*_bwrap_prefix(bwrap, root), "--chdir", INSIDE_WORKSPACE]
            env, cwd = _env(INSIDE_WORKSPACE, INSIDE_WORKSPACE), None
        else:
            if as_root and _others_can_run(_python()):
                config["drop_to"] = NOBODY
            config["workspaces"] = str(root)
            argv, cwd = [], str(root)
            env = _env(str(root), str(root))
        # Searchable, not listable: a program finds no other program's workspace by name.
        root.chmod(0o711)
        argv += [_python(), "-I", "-S", "-B", "-c", _STUB, str(theirs.fileno()), json.dumps(config)]
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            # Never the serving process's own pipes: the zygote and its children must not
            # hold them open (a caller waiting for their end would wait on it); what a
            # program prints comes back in its done frame.
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            cwd=cwd,
            env=env,
            # Its own process group (ended as one), in this session: see the stub's
            # _no_terminal for why not a session of its own.
            process_group=0,
        )
    except BaseException:
        ours.close()
        shutil.rmtree(root, ignore_errors=True)
        raise
    finally:
        theirs.close()
    return popen, ours, root


def _bwrap_prefix(bwrap: str, workspace: Path) -> list[str]:
    argv = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--die-with-parent"]
    if os.geteuid() != 0:
        # Unprivileged: a user namespace, the program nobody in it.
        argv += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--cap-drop", "ALL"]
    # As root no user namespace: the kernel exempts root's processes from RLIMIT_NPROC,
    # however mapped, so the stub drops to nobody itself before it reads a program.
    argv += ["--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = Path("/", link)
        if target.is_symlink():
            argv += ["--symlink", os.readlink(target), f"/{link}"]
        elif target.is_dir():
            argv += ["--ro-bind", str(target), f"/{link}"]
    prefix = Path(sys.base_prefix).resolve()
    if not prefix.is_relative_to("/usr"):
        for parent in reversed(prefix.parents[:-1]):  # searchable by nobody (/root is 0700)
            argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--ro-bind", str(prefix), str(prefix)]
    site = Path(sys.base_prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    if (site / "site-packages").is_dir():
        argv += ["--tmpfs", str(site / "site-packages")]  # the operator's packages: not data
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chmod", "1777", "/tmp"]
    argv += ["--bind", str(workspace), INSIDE_WORKSPACE]
    return argv


def _others_can_run(python: str) -> bool:
    """Whether a user other than the owner can run ``python`` (each directory above it
    searchable, the stdlib readable): then the weaker mode may drop to ``nobody``."""
    path = Path(python)
    for part in [path, *path.parents, Path(os.__file__).parent]:
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH or (
            part == Path(os.__file__).parent and not mode & stat.S_IROTH
        ):
            return False
    return True


def _python() -> str:
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def _env(home: str, tmp: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": home, "TMPDIR": tmp}


__all__ = [
    "HEADER",
    "Isolation",
    "SandboxLimits",
    "bwrap_usable",
    "start_zygote",
]
