"""The sandboxed side: what runs in the child process, the standard library only.

This file is not imported by the serving process: its source is the ``-c`` argument of
a fresh interpreter (``python -I -S -B``), so it imports no plait module and holds
nothing of the server's: no mesh, no credentials, no capability objects. That process
is the zygote: it never runs program code; it warms the paths a child takes, then
forks one child per ``fork`` message on its control channel (the child's own channel
goes back over ``SCM_RIGHTS``) and reports each child's exit. A child:

1. closes the zygote's control channel, makes its own empty workspace and lowers its
   resource limits (CPU seconds, address space, processes, file size, open files; none
   can be raised again by the program), then drops to ``nobody`` where it may,
2. installs an audit hook that refuses starting processes, forking, ``ctypes``,
   network connections, signalling other processes, raising limits, reading other
   processes' ``/proc`` entries and writing outside its workspace, says ``ready``,
3. waits for one ``run`` frame (the compiled program, its payload and its capabilities
   names, marshalled in one frame: the serving process is trusted, the child is not),
   runs it with proxies for the capabilities, ends with one ``done`` frame and exits
   once the serving process has closed its channel (or killed it).

A proxy's every method is one ``call`` frame answered by the serving process, which
holds the real capabilities and decides; a capability's error comes back as data
(type name, message and a reference the server re-raises the original by).

Frames are a 4-byte big-endian length and a body: UTF-8 JSON from the child, marshal
from the serving process (the ``run`` frame and the replies: the child trusts it; what
the child sends is never unmarshalled there).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    # No network in the sandbox: asyncio's optional import of ssl (OpenSSL's load, a
    # good part of a cold start) is skipped.
    sys.modules.setdefault("ssl", None)  # type: ignore[arg-type]

import asyncio
import contextlib
import gc
import io
import json
import marshal
import os
import resource
import select
import signal
import socket
import struct
from collections.abc import Iterator, Mapping
from types import CodeType, TracebackType
from typing import Any

_ENTRY = "__plait_program__"
_HEADER = struct.Struct(">I")
_PRINTED = 64 << 10  # the last this many characters a program printed come back


class CapabilityError(Exception):
    """A capability call the serving process refused or that failed there.

    Attributes:
        type: the error's type name in the serving process (``VersionConflict``...).
        ref: the number the serving process re-raises the original error by.
    """

    def __init__(self, type_name: str, message: str, ref: int) -> None:
        super().__init__(message)
        self.type = type_name
        self.ref = ref


class SandboxRefused(PermissionError):
    """An operation the sandbox does not allow (the audit hook's refusal)."""


def _limit(which: int, value: int) -> None:
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        _, hard = resource.getrlimit(which)
        if hard == resource.RLIM_INFINITY or value <= hard:
            resource.setrlimit(which, (value, hard))
        else:
            resource.setrlimit(which, (hard, hard))


def _apply_limits(limits: Mapping[str, int]) -> None:
    _limit(resource.RLIMIT_CPU, limits["cpu_seconds"])
    _limit(resource.RLIMIT_AS, limits["memory_bytes"])
    _limit(resource.RLIMIT_NPROC, limits["processes"])
    _limit(resource.RLIMIT_FSIZE, limits["file_bytes"])
    _limit(resource.RLIMIT_NOFILE, limits["open_files"])
    _limit(resource.RLIMIT_CORE, 0)


class _Frames:
    """Length-prefixed frames over the RPC socket (JSON out, marshal in)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def send_blocking(self, frame: Mapping[str, Any]) -> None:
        data = json.dumps(frame, default=repr).encode()
        self.sock.sendall(_HEADER.pack(len(data)) + data)

    def recv_run(self) -> dict[str, Any]:
        """The ``run`` frame (marshal, from the serving process)."""
        size = _HEADER.unpack(self._exactly(_HEADER.size))[0]
        frame = marshal.loads(self._exactly(size))
        return frame if isinstance(frame, dict) else {}

    def _exactly(self, n: int) -> bytes:
        chunks: list[bytes] = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise EOFError("the serving process closed the channel")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


class _Client:
    """Calls into the serving process from the program's event loop."""

    def __init__(self, frames: _Frames, loop: asyncio.AbstractEventLoop) -> None:
        self.frames = frames
        self.loop = loop
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.next_id = 0
        self.buffer = b""
        self.reading = False
        self.lock = asyncio.Lock()

    async def call(
        self, cap: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        self.next_id += 1
        call_id = self.next_id
        future: asyncio.Future[Any] = self.loop.create_future()
        self.pending[call_id] = future
        if not self.reading:  # a program that calls nothing reads nothing
            # One callback reads every reply as it comes (not a read awaited per reply).
            self.reading = True
            self.loop.add_reader(self.frames.sock.fileno(), self._readable)
        frame = {"op": "call", "id": call_id, "cap": cap, "method": method}
        data = json.dumps({**frame, "args": list(args), "kwargs": kwargs}, default=repr).encode()
        async with self.lock:  # frames never interleave
            await self.loop.sock_sendall(self.frames.sock, _HEADER.pack(len(data)) + data)
        return await future

    def stop(self) -> None:
        """Stop reading replies."""
        if self.reading:
            self.reading = False
            self.loop.remove_reader(self.frames.sock.fileno())

    def _readable(self) -> None:
        try:
            chunk = self.frames.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.stop()
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(EOFError("the serving process closed the channel"))
            return
        self.buffer += chunk
        while len(self.buffer) >= _HEADER.size:
            size = _HEADER.unpack_from(self.buffer)[0]
            if len(self.buffer) < _HEADER.size + size:
                break
            body = self.buffer[_HEADER.size : _HEADER.size + size]
            self.buffer = self.buffer[_HEADER.size + size :]
            self._settle(marshal.loads(body))  # from the serving process

    def _settle(self, reply: dict[str, Any]) -> None:
        future = self.pending.pop(reply.get("id", -1), None)
        if future is None or future.done():
            return
        if reply.get("ok"):
            future.set_result(reply.get("value"))
        else:
            error = reply.get("error") or {}
            future.set_exception(
                CapabilityError(
                    str(error.get("type", "Error")),
                    str(error.get("message", "")),
                    error.get("ref", 0),
                )
            )


class _Capability:
    """A proxy: each of its methods is a call the serving process answers (or refuses).

    ``methods`` is empty for a capability the program was not given: then every name
    is tried, and the serving process says why it is missing.
    """

    __slots__ = ("_call", "_methods", "_name")

    def __init__(self, name: str, call: Any, methods: list[str]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_call", call)
        object.__setattr__(self, "_methods", tuple(methods))

    def __dir__(self) -> list[str]:
        return list(self._methods)

    def __getattr__(self, method: str) -> Any:
        name, call = self._name, self._call
        if self._methods and method not in self._methods:
            raise AttributeError(f"the {name} capability has no method {method!r}")

        async def remote(*args: Any, **kwargs: Any) -> Any:
            return await call(name, method, args, kwargs)

        remote.__name__ = method
        return remote

    def __repr__(self) -> str:
        return f"<capability {self._name}>"


class Payload(Mapping[str, Any]):
    """A program's input, read-only: ``payload["target"]`` or ``payload.target``."""

    __slots__ = ("_data",)

    def __init__(self, data: Any) -> None:
        object.__setattr__(self, "_data", dict(data) if isinstance(data, dict) else {"input": data})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __getattr__(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            raise AttributeError(
                f"the payload has no {key!r} (it has: {', '.join(self)})"
            ) from None


class Pi:
    """``π`` (also ``pi``): the payload and the shell in one name, as program texts
    written for pi-style runtimes use them: ``π.target`` reads the payload's
    ``target``, ``pi.bash(command=...)`` (and ``pi.call``) call the tools capability."""

    __slots__ = ("_payload", "_tools")

    _TOOLS = ("bash", "call")

    def __init__(self, payload: Payload, tools: Any) -> None:
        object.__setattr__(self, "_payload", payload)
        object.__setattr__(self, "_tools", tools)

    def __getattr__(self, name: str) -> Any:
        if name in self._TOOLS:
            return getattr(self._tools, name)
        try:
            return self._payload[name]
        except KeyError:
            raise AttributeError(
                f"π has no {name!r}: the payload has {', '.join(self._payload) or 'nothing'}"
                ", and π.bash and π.call run tools"
            ) from None

    def __repr__(self) -> str:
        return "<π>"


_REFUSED_EVENTS = (
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "signal.pthread_kill",
    "subprocess.Popen",
    "pty.spawn",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.cdata",
    "ctypes.call_function",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "resource.setrlimit",
    "resource.prlimit",
)
_REFUSED_IMPORTS = frozenset(
    ("ctypes", "_ctypes", "_posixsubprocess", "multiprocessing", "_multiprocessing")
)
_WRITES = frozenset(
    (
        "os.rename",
        "os.remove",
        "os.rmdir",
        "os.mkdir",
        "os.symlink",
        "os.link",
        "os.chmod",
        "os.chown",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
        "shutil.copyfile",
        "shutil.move",
    )
)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _audit_hook(writable: tuple[str, ...], readable: tuple[str, ...]) -> Any:
    """The hook refusing what a program may not do, whichever mode isolates it."""

    def inside(path: object, roots: tuple[str, ...]) -> bool:
        if isinstance(path, int):
            return True  # an fd already open: its open was checked
        try:
            real = os.path.realpath(os.fsdecode(path))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(_REFUSED_EVENTS):
            raise SandboxRefused(f"{event} is not permitted in the program sandbox")
        if event == "import" and args and str(args[0]).partition(".")[0] in _REFUSED_IMPORTS:
            raise SandboxRefused(f"importing {args[0]} is not permitted in the program sandbox")
        if event == "open" and args:
            path, mode, flags = args[0], args[1], args[2] if len(args) > 2 else 0
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writes and not inside(path, writable):
                raise SandboxRefused(
                    f"writing {path!r} is not permitted: write under the workspace"
                )
            if not writes and not inside(path, readable + writable):
                raise SandboxRefused(f"reading {path!r} is not permitted in the program sandbox")
        elif event in _WRITES and args:
            targets = [a for a in args[:2] if isinstance(a, str | bytes)]
            if not all(inside(t, writable) for t in targets):
                raise SandboxRefused(f"{event} outside the workspace is not permitted")

    return hook


def _forget_fork_exec() -> None:
    """Drop the references to ``_posixsubprocess`` that asyncio's import of subprocess
    left, so a program cannot start processes around the audit hook that way."""
    import subprocess

    subprocess._fork_exec = None  # type: ignore[attr-defined]
    sys.modules.pop("_posixsubprocess", None)


def _line_of(tb: TracebackType | None, filename: str) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _failure(exc: BaseException, filename: str) -> dict[str, Any]:
    line = _line_of(exc.__traceback__, filename)
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc), "line": line}
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, CapabilityError):
            error["ref"] = cause.ref  # the program let a capability's error through
            break
        cause = cause.__cause__ or cause.__context__
        if cause is exc:
            break
    return error


async def _run(client: _Client, code: CodeType, names: dict[str, Any]) -> Any:
    try:
        namespace: dict[str, Any] = {"__name__": _ENTRY, **names}
        exec(code, namespace)
        return await namespace[_ENTRY]()
    finally:
        client.stop()


def _child(sock: socket.socket, config: Mapping[str, Any], name: str) -> None:
    """A fresh fork of the zygote: its own workspace, its limits, the audit hook, then
    one program; it never returns."""
    try:
        workspace = os.path.join(config["workspaces"], name)
        os.mkdir(workspace, 0o700)
        drop = config.get("drop_to")
        if drop is not None:
            os.chown(workspace, drop, drop)
        os.chdir(workspace)
        os.environ["HOME"] = os.environ["TMPDIR"] = workspace
        _apply_limits(config)
        if drop is not None:  # as root: become nobody (RLIMIT_NPROC binds it) first
            os.setgroups([])
            os.setgid(drop)
            os.setuid(drop)
        _serve_one(sock, config, workspace)
    finally:
        os._exit(0)


def _serve_one(sock: socket.socket, config: Mapping[str, Any], workspace: str) -> None:
    frames = _Frames(sock)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    stdlib = os.path.dirname(os.__file__)
    readable = (*config["readable"], stdlib, "/dev/null", "/dev/urandom", f"/proc/{os.getpid()}")
    writable = (workspace, *config["writable"])
    # Before it says ready: the pages a run writes are copied from the zygote's now,
    # off the call's path.
    _rehearse(loop)
    sys.addaudithook(_audit_hook(writable, readable))
    frames.send_blocking({"op": "ready", "pid": os.getpid()})
    try:
        job = frames.recv_run()
    except EOFError:  # the pool closed before a program came: nothing to do
        return
    if job.get("op") != "run":
        return
    _run_job(frames, loop, job)
    # Exit only once the serving process is done with the channel: tearing this
    # process down now would hold the CPU the serving process wakes on to read the result.
    with contextlib.suppress(OSError):
        while sock.recv(4096):
            pass


def _run_job(frames: _Frames, loop: asyncio.AbstractEventLoop, job: Mapping[str, Any]) -> None:
    """Run the program of a ``run`` frame on ``loop``, its calls over ``frames``; send
    its ``done`` frame."""
    sock = frames.sock
    printed = io.StringIO()
    sys.stdout = sys.stderr = printed
    filename = str(job["filename"])
    code = job["code"]
    client = _Client(frames, loop)
    sock.setblocking(False)
    names: dict[str, Any] = {
        name: _Capability(name, client.call, methods)
        for name, methods in job["capabilities"].items()
    }
    names["payload"] = Payload(job.get("input"))
    names["π"] = names["pi"] = Pi(names["payload"], names.get("tools"))
    try:
        result = loop.run_until_complete(_run(client, code, names))
        done: dict[str, Any] = {"op": "done", "ok": True, "value": result}
        data = json.dumps({**done, "printed": printed.getvalue()[-_PRINTED:]}).encode()
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        failed = {"op": "done", "ok": False, "error": _failure(exc, filename)}
        data = json.dumps({**failed, "printed": printed.getvalue()[-_PRINTED:]}).encode()
    sock.setblocking(True)
    sock.sendall(_HEADER.pack(len(data)) + data)


class _Zygote:
    """The fork server: forks a child per ``fork`` request, reports each one's end."""

    def __init__(self, control: socket.socket, config: Mapping[str, Any]) -> None:
        self.control = control
        self.config = config
        self.children: set[int] = set()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def send(self, frame: Mapping[str, Any], fds: list[int] | None = None) -> None:
        data = json.dumps(frame).encode()
        if fds:
            socket.send_fds(self.control, [data], fds)
        else:
            self.control.send(data)

    def serve(self) -> None:
        self.send({"op": "ready", "pid": os.getpid()})
        while True:
            control = self.control.fileno()
            ready, _, _ = select.select([control, self.wake_r], [], [])
            if self.wake_r in ready:
                os.read(self.wake_r, 512)
                self.reap()
            if control in ready:
                message = self.control.recv(65536)
                if not message:  # the serving process is gone: so are its programs
                    for pid in self.children:
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
                    os._exit(0)
                frame = json.loads(message)
                if frame.get("op") == "fork":
                    self.fork(str(frame["name"]))
                elif frame.get("op") == "kill" and frame.get("pid") in self.children:
                    with contextlib.suppress(OSError):
                        os.kill(frame["pid"], signal.SIGKILL)

    def fork(self, name: str) -> None:
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            # The child holds nothing of the zygote's: not its control channel (it could
            # ask for forks), not its signal pipe, not the serving end of its own channel.
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (self.control.fileno(), self.wake_r, self.wake_w, ours.fileno()):
                os.close(fd)
            _child(theirs, self.config, name)
        theirs.close()
        self.children.add(pid)
        self.send({"op": "forked", "name": name, "pid": pid}, [ours.fileno()])
        ours.close()

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            self.send({"op": "exited", "pid": pid, "code": os.waitstatus_to_exitcode(status)})


_REHEARSAL = """
async def __plait_program__():
    seen = await mesh.get("rehearsal")
    print(seen)
    return {"who": payload.who, "seen": seen}
"""


def _rehearse(loop: asyncio.AbstractEventLoop) -> None:
    """Run a program's whole path on ``loop`` once (its run frame read, a capability
    call and its reply, the program run, its done frame sent), over a socket pair that
    plays the serving process: what the path loads, allocates or copies on first use is
    then done before a program is waited for, not on its call's path."""
    a, b = socket.socketpair()
    saved = sys.stdout, sys.stderr
    try:
        job = {
            "op": "run",
            "code": compile(_REHEARSAL, "<rehearsal>", "exec"),
            "filename": "<rehearsal>",
            "input": {"who": "rehearsal"},
            "capabilities": {"mesh": ["get"]},
        }
        reply = marshal.dumps({"id": 1, "ok": True, "value": {"value": [1, "x", None]}})
        run = marshal.dumps(job)
        b.sendall(_HEADER.pack(len(run)) + run + _HEADER.pack(len(reply)) + reply)
        frames = _Frames(a)
        _run_job(frames, loop, frames.recv_run())
        b.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while b.recv(1 << 16):
                pass
    finally:
        sys.stdout, sys.stderr = saved
        a.close()
        b.close()


def _warm_up() -> None:
    """Rehearse, once in the zygote, the paths each child takes: what they load is then
    in the image every child is forked from. Then freeze what the zygote holds, so a
    child's collections do not touch (and copy) those pages."""
    loop = asyncio.new_event_loop()
    try:
        _rehearse(loop)
    finally:
        loop.close()
    gc.collect()
    gc.freeze()


def _no_terminal() -> None:
    """Leave the serving process's controlling terminal, if it has one: no program can
    then open it (``/dev/tty``) to push input into it (``TIOCSTI``). The zygote stays in
    the serving process's session (a session of its own would also be a scheduling group
    of its own, and each of its programs' wake-ups would wait on it), so it detaches
    itself, and where it cannot, it starts a session of its own after all."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return  # no controlling terminal
    try:
        import fcntl
        import termios

        fcntl.ioctl(fd, termios.TIOCNOTTY)
    except OSError:
        os.setsid()
    finally:
        os.close(fd)


def main() -> None:
    """The zygote: set up once, then fork one child per program the serving process asks for."""
    fd, config_json = int(sys.argv[1]), sys.argv[2]
    config: dict[str, Any] = json.loads(config_json)
    _limit(resource.RLIMIT_CORE, 0)
    _no_terminal()
    _forget_fork_exec()  # before any fork: no child inherits _posixsubprocess
    _warm_up()
    _Zygote(socket.socket(fileno=fd), config).serve()


if __name__ == "__main__":
    main()
