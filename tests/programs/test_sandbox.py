"""Program texts run in a sandbox: each escape a saved program tried in-process fails.

Every test runs under both isolations: bubblewrap (skipped, with bwrap's reason, where it
cannot run) and the weaker rlimits mode. A program's attempt comes back as data where
it can (what it found), so a test asserts the boundary held, not only that it raised.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.decisions import Agent, DecisionAsker, DecisionId, Human
from plait.errors import NotPermitted, ProgramError
from plait.mesh import Mesh, open_mesh
from plait.programs import get_program, grant_all, promote, run_program, run_source, save_program
from plait.programs.sandbox import (
    SandboxLimits,
    SandboxPool,
    bwrap_usable,
    choose_isolation,
    use_pool,
)

pytestmark = pytest.mark.anyio

SECRETS = {
    "PLAIT_AUDIT_KEY": "audit-sekrit-1",
    "PLAIT_SECRET_DB": "db-sekrit-2",
    "PLAIT_MESH": "redis://:mesh-sekrit-3@127.0.0.1:6379",
    "PLAIT_TOKEN": "token-sekrit-4",
}

LIMITS = SandboxLimits(cpu_seconds=2, memory_bytes=512 << 20, processes=32, wall_seconds=60)


@pytest.fixture(params=["bwrap", "rlimits"])
def isolation(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each isolation, as the process's program sandbox for the test."""
    if request.param == "bwrap" and (why := bwrap_usable()) is not None:
        pytest.skip(why)
    with use_pool(SandboxPool(size=1, limits=LIMITS, isolation=request.param)):
        yield request.param


@pytest.fixture
async def memory_mesh() -> Iterator[Mesh]:  # type: ignore[misc]
    """A fresh in-memory mesh."""
    async with open_mesh("memory://") as mesh:
        yield mesh


async def test_no_credential_reaches_the_program(
    isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    text = """
import os
found = {"env": dict(os.environ)}
for path in ("/proc/self/environ", f"/proc/{payload.server}/environ", "/proc/1/environ"):
    try:
        with open(path, "rb") as f:
            found[path] = f.read().decode(errors="replace")
    except OSError as exc:
        found[path] = "refused: " + type(exc).__name__
return found
"""
    found = await run_source(text, {"server": os.getpid()}, grant_all(None))
    shown = json.dumps(found)
    assert not [v for v in SECRETS.values() if v in shown]
    assert not [k for k in found["env"] if k.startswith("PLAIT")]
    # The serving process's own environment is not readable at all.
    assert found[f"/proc/{os.getpid()}/environ"].startswith("refused")


async def test_the_raw_mesh_and_the_services_are_out_of_reach(
    isolation: str, memory_mesh: Mesh
) -> None:
    mesh = memory_mesh
    await DecisionAsker(mesh).raise_("Release?", id=DecisionId("d1"), by=Agent("ci"))
    await save_program(mesh, "me", "return 1")
    text = """
found = {}
for attempt in ("mesh._MeshCapability__mesh", "programs._ProgramsCapability__grants",
                "decisions._DecisionsCapability__board", "tools._ToolsCapability__registry"):
    try:
        found[attempt] = repr(eval(attempt))
    except Exception as exc:
        found[attempt] = "refused: " + type(exc).__name__
try:
    from plait.decisions import DecisionAnswerer, Human
    from plait.programs import promote
    raw = mesh._MeshCapability__mesh
    await DecisionAnswerer(raw).answer("d1", option="yes", by=Human("alice"))
    await promote(raw, "me", 1, by=Human("alice"))
    found["escape"] = "answered and promoted"
except Exception as exc:
    found["escape"] = "refused: " + type(exc).__name__
return found
"""
    found = await run_source(text, None, grant_all(mesh))
    assert all(v.startswith("refused") for v in found.values()), found
    assert (await DecisionAsker(mesh).get(DecisionId("d1"))).status == "open"
    assert (await get_program(mesh, "me", 1)).promotion is None


async def test_a_forged_call_reaches_only_the_capability_methods(
    isolation: str, memory_mesh: Mesh
) -> None:
    mesh = memory_mesh
    await DecisionAsker(mesh).raise_("Release?", id=DecisionId("d1"), by=Agent("ci"))
    await save_program(mesh, "me", "return 1")
    # The proxy's channel is the program's to use: whatever it sends, the serving
    # process answers only the capabilities' public methods.
    text = """
call = next(c.cell_contents for c in mesh.get.__closure__ if c.cell_contents.__name__ == "call")
found = {}
for cap, method, args in [
    ("mesh", "_MeshCapability__mesh", []), ("mesh", "__class__", []),
    ("decisions", "answer", ["d1", "yes"]), ("decisions", "_DecisionsCapability__board", []),
    ("programs", "promote", ["me", 1]), ("desk", "answer", ["d1"]), ("tokens", "create", []),
    ("mesh", "put", ["programs/me", {"promoted": {"1": {"by": "alice", "at": 0}}}]),
    ("mesh", "put", ["tokens/forged", {"kind": "human"}]),
]:
    try:
        found[f"{cap}.{method}"] = repr(await call(cap, method, tuple(args), {}))
    except Exception as exc:
        found[f"{cap}.{method}"] = "refused: " + str(exc)
return found
"""
    found = await run_source(text, None, grant_all(mesh))
    assert all(v.startswith("refused") for v in found.values()), found
    assert "not a capability method" in found["decisions.answer"]
    assert (await DecisionAsker(mesh).get(DecisionId("d1"))).status == "open"
    assert (await get_program(mesh, "me", 1)).promotion is None
    assert await mesh.get("tokens/forged") is None


async def test_no_plait_object_is_in_the_program_s_process(isolation: str) -> None:
    text = """
import gc
seen, todo, classes = set(), [().__class__.__base__], []
while todo:
    cls = todo.pop()
    try:
        subs = cls.__subclasses__()
    except TypeError:
        subs = type.__subclasses__(cls)
    for sub in subs:
        if sub not in seen:
            seen.add(sub)
            todo.append(sub)
            if (getattr(sub, "__module__", None) or "").startswith("plait"):
                classes.append(sub.__qualname__)
objects = [type(o).__qualname__ for o in gc.get_objects()
           if (getattr(type(o), "__module__", None) or "").startswith("plait")]
return {"classes": classes, "objects": objects}
"""
    found = await run_source(text, None, grant_all(None))
    assert found == {"classes": [], "objects": []}


@pytest.mark.parametrize(
    "text",
    [
        "import ctypes\nreturn ctypes.CDLL(None).getpid()",
        "import subprocess\nreturn subprocess.run(['id'], capture_output=True).stdout.decode()",
        "import os\nreturn os.system('id')",
        "import os\nreturn os.popen('id').read()",
        "import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 6379))\nreturn 'connected'",
        "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (10**6, 10**6))\nreturn 1",
    ],
    ids=["ctypes", "subprocess", "os.system", "os.popen", "socket", "setrlimit"],
)
async def test_a_program_cannot_start_processes_load_code_or_connect(
    isolation: str, text: str
) -> None:
    with pytest.raises(ProgramError, match="not permitted in the program sandbox"):
        await run_source(text, None, grant_all(None), filename="escape.py")


async def test_a_program_writes_only_in_its_own_workspace(isolation: str, tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    with pytest.raises(ProgramError, match=r"escape\.py:1: "):
        await run_source(
            "open(payload.target, 'w').write('x')",
            {"target": str(target)},
            grant_all(None),
            filename="escape.py",
        )
    assert not target.exists()
    text = "open('notes.txt', 'w').write('kept')\nreturn open('notes.txt').read()"
    assert await run_source(text, None, grant_all(None)) == "kept"
    # Each program gets a fresh process and workspace: nothing of the last one is left.
    text = "import os, builtins\nreturn [os.listdir('.'), hasattr(builtins, 'leak')]"
    await run_source("import builtins\nbuiltins.leak = 1", None, grant_all(None))
    assert await run_source(text, None, grant_all(None)) == [[], False]


async def test_calls_of_one_promoted_version_share_nothing(
    isolation: str, memory_mesh: Mesh
) -> None:
    # The same promoted version, by the same principal, twice: the second call finds
    # nothing the first left (globals, builtins, modules, files, environment, process).
    text = """
import builtins, os, sys, json
found = {
    "global": globals().get("left"),
    "builtin": getattr(builtins, "left", None),
    "module": getattr(json, "left", None),
    "modules": "left_module" in sys.modules,
    "files": sorted(os.listdir(".")),
    "env": os.environ.get("LEFT"),
    "pid": os.getpid(),
}
globals()["left"] = builtins.left = json.left = payload.mark
sys.modules["left_module"] = json
os.environ["LEFT"] = payload.mark
with open("left.txt", "w") as f:
    f.write(payload.mark)
return found
"""
    await save_program(memory_mesh, "stateful", text)
    await promote(memory_mesh, "stateful", 1, by=Human("ana"))
    grants = grant_all(memory_mesh)
    first = await run_program("stateful", {"mark": "first"}, grants)
    second = await run_program("stateful", {"mark": "second"}, grants)
    clean = {"global": None, "builtin": None, "module": None, "modules": False, "files": []}
    assert {k: v for k, v in first.items() if k not in ("env", "pid")} == clean
    assert {k: v for k, v in second.items() if k not in ("env", "pid")} == clean
    assert first["env"] is None and second["env"] is None
    assert first["pid"] != second["pid"]


async def test_a_fork_bomb_fails_and_the_host_survives(isolation: str) -> None:
    text = """
import os
pids = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
return len(pids)
"""
    with pytest.raises(ProgramError, match=r"bomb\.py:5: SandboxRefused: os\.fork is not"):
        await run_source(text, None, grant_all(None), filename="bomb.py")
    assert await run_source("return 'still serving'", None, grant_all(None)) == "still serving"


_ON_A_TERMINAL = """
import asyncio, json, os, sys
from plait.programs import grant_all, run_source
from plait.programs.sandbox import SandboxPool, use_pool

# This process on a terminal of its own, as a server started from a shell is.
_, terminal = os.openpty()
os.setsid()
os.close(os.open(os.ttyname(terminal), os.O_RDWR))
os.close(os.open("/dev/tty", os.O_RDWR))  # it is this process's controlling terminal
TEXT = (
    "import os\\n"
    "with open(f'/proc/{os.getpid()}/stat') as f:\\n"
    "    fields = f.read().rsplit(')', 1)[1].split()\\n"
    "return int(fields[4])\\n"
)

async def main():
    with use_pool(SandboxPool(size=0, isolation=sys.argv[1])):
        print(json.dumps(await run_source(TEXT, None, grant_all(None))))

asyncio.run(main())
"""


@pytest.mark.parametrize("mode", ["bwrap", "rlimits"])
def test_a_program_has_no_terminal_to_type_into(mode: str) -> None:
    # A process that holds the serving process's controlling terminal could push input
    # into it (TIOCSTI): the program's process has none, though it shares the session.
    if mode == "bwrap" and (why := bwrap_usable()) is not None:
        pytest.skip(why)
    done = subprocess.run(
        [sys.executable, "-c", _ON_A_TERMINAL, mode],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 0  # tty_nr: no controlling terminal


async def test_a_memory_hog_fails_under_the_limit(isolation: str) -> None:
    # bytes(n) is calloc'd: in-process it only reserves the pages; the sandbox's
    # address-space limit refuses the reservation itself.
    with pytest.raises(ProgramError, match=r"hog\.py:1: MemoryError"):
        await run_source("return len(bytes(1 << 30))", None, grant_all(None), filename="hog.py")


async def test_a_cpu_spin_is_ended_by_the_cpu_limit(isolation: str) -> None:
    with pytest.raises(ProgramError, match=r"ended without a result .*signal"):
        await run_source("while True:\n    pass", None, grant_all(None), filename="spin.py")


async def test_a_program_past_its_wall_clock_limit_is_killed() -> None:
    limits = SandboxLimits(wall_seconds=0.5)
    with use_pool(SandboxPool(size=0, limits=limits, isolation="rlimits")):
        with pytest.raises(ProgramError, match=r"sleep\.py: the program ran past its 0\.5 s"):
            text = "import time\ntime.sleep(3600)"
            await run_source(text, None, grant_all(None), filename="sleep.py")


async def test_a_program_s_exception_is_one_line_with_its_line_number(isolation: str) -> None:
    text = "x = 1\nraise ValueError(f'boom {x}')"
    with pytest.raises(ProgramError) as caught:
        await run_source(text, None, grant_all(None), filename="deploy.py")
    assert str(caught.value) == "deploy.py:2: ValueError: boom 1"


async def test_a_program_may_not_run_an_unpromoted_text(isolation: str, memory_mesh: Mesh) -> None:
    mesh = memory_mesh
    await save_program(mesh, "helper", "return 'ran'")
    text = "return await programs.run('helper', None, require_promoted=False)"
    with pytest.raises(NotPermitted, match="require_promoted=False\\) is refused"):
        await run_source(text, None, grant_all(mesh))
    await promote(mesh, "helper", 1, by=Human("ana"))
    assert await run_source("return await programs.run('helper')", None, grant_all(mesh)) == "ran"
    # A person may still run it unpromoted, directly.
    assert await run_program("helper", None, grant_all(mesh), require_promoted=False) == "ran"


def test_the_weaker_mode_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="plait.programs.sandbox"):
        assert choose_isolation("rlimits") == "rlimits"
    assert "weaker rlimits mode" in caplog.text


async def test_the_limits_hold_in_the_kernel_for_a_user_they_bind(isolation: str) -> None:
    text = """
import os, resource
names = ("CPU", "AS", "NPROC", "FSIZE", "NOFILE")
return {"uid": os.getuid(), **{n: resource.getrlimit(getattr(resource, "RLIMIT_" + n))
                               for n in names}}
"""
    found = await run_source(text, None, grant_all(None))
    assert found["CPU"] == [LIMITS.cpu_seconds] * 2
    assert found["AS"] == [LIMITS.memory_bytes] * 2
    assert found["NPROC"] == [LIMITS.processes] * 2
    assert found["FSIZE"] == [LIMITS.file_bytes] * 2
    assert found["NOFILE"] == [LIMITS.open_files] * 2
    if isolation == "bwrap" or os.geteuid() != 0:
        # The kernel ignores RLIMIT_NPROC for root: the program never runs as root here.
        assert found["uid"] != 0


async def test_each_program_is_a_fresh_fork_of_one_zygote_it_cannot_reach(isolation: str) -> None:
    text = """
import os, socket
channels = []
for fd in map(int, os.listdir('/proc/self/fd')):
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        continue
    channels.append(sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE))
    sock.detach()
return {"parent": os.getppid(), "pid": os.getpid(), "channels": channels}
"""
    first = await run_source(text, None, grant_all(None))
    second = await run_source(text, None, grant_all(None))
    # One zygote forked both (not this process), each a process of its own.
    assert first["parent"] == second["parent"] != os.getpid()
    assert first["pid"] != second["pid"]
    # The zygote's control channel (the one socket that can ask for forks) is not open
    # in a program's process: only its own stream channel and its event loop's.
    assert 5 not in first["channels"]  # SOCK_SEQPACKET


async def test_a_dead_zygote_is_replaced() -> None:
    with use_pool(SandboxPool(size=0, limits=LIMITS, isolation="rlimits")) as pool:
        assert await run_source("return 1", None, grant_all(None)) == 1
        zygote = pool.zygote
        assert zygote is not None
        os.killpg(zygote.popen.pid, 9)
        zygote.popen.wait()
        assert await run_source("return 2", None, grant_all(None)) == 2
        assert pool.zygote is not zygote
