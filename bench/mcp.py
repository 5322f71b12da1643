"""An MCP tool call through plait's gates, beside the same call made directly with the
``mcp`` client, in the same process, on the same local stdio server.

``gated_call`` is what an agent's tool call costs in plait: the allow list
(:func:`plait.tools.check_allowed`), the argument schema, the approval gate, the
registry's time budget, the kept session and the result made a value; its baseline
``direct_call`` is ``ClientSession.call_tool`` on a session of its own to another process
of the same server (``mcp-server-time``'s ``get_current_time``). They are measured in
alternating rounds of calls, so both see the same load; ``ratio`` is baseline / value
(target >= 0.8).

Run: ``python bench/mcp.py [--json] [--seconds 1.0]``.
"""

# ruff: noqa: E402  -- the SDK is imported before the rest, see below
from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

# This file is named mcp.py, and its directory comes first on sys.path when it runs as a
# script: the MCP SDK is imported with that directory left out, so it is not shadowed.
_HERE = Path(__file__).resolve().parent
_PATH = list(sys.path)
sys.path[:] = [p for p in _PATH if Path(p or ".").resolve() != _HERE]
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path[:] = _PATH
from _common import Cost, Figure, alternate, parse_args, report

from plait.mcp import declare, put_server
from plait.mcp.client import mcp_tools
from plait.mesh import open_mesh
from plait.profiles import AgentProfile
from plait.tools import ToolContext, ToolRegistry, check_allowed, gate

BENCH = "mcp"
SERVER = [str(Path(sys.executable).with_name("mcp-server-time")), "--local-timezone", "UTC"]
ARGS = {"timezone": "UTC"}
BATCH = 20


async def main() -> None:
    """Measure and print the figures."""
    args = parse_args(__doc__ or "")
    rounds = max(5, int(args.seconds * 10))
    profile = AgentProfile(name="bench", tools=["time.*"])
    ctx = ToolContext(node="bench")
    registry = ToolRegistry()
    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    async with open_mesh("memory://") as mesh:
        await put_server(mesh, declare(name="time", command=SERVER))
        async with (
            mcp_tools(mesh, registry),
            stdio_client(params) as streams,
            ClientSession(*streams) as session,
        ):
            await session.initialize()

            async def gated() -> float:
                started = time.perf_counter()
                for _ in range(BATCH):
                    tool = check_allowed("time.get_current_time", profile, registry=registry)
                    checked = registry.validate_args(tool.name, ARGS)
                    if gate(tool, trusted=True, pre_approved=profile.pre_approved) != "allow":
                        raise AssertionError("the bench tool needs no approval")
                    await registry.call(tool.name, checked, ctx)
                return (time.perf_counter() - started) * 1000 / BATCH

            async def direct() -> float:
                started = time.perf_counter()
                for _ in range(BATCH):
                    await session.call_tool("get_current_time", ARGS)
                return (time.perf_counter() - started) * 1000 / BATCH

            await gated(), await direct()  # warm both paths
            through, plain = await alternate(rounds, gated, direct)
    note = "stdio mcp-server-time; baseline: ClientSession.call_tool directly, target >= 0.8"
    figures: list[Figure] = [
        Cost(
            BENCH,
            "gated_call",
            statistics.median(through),
            "ms",
            statistics.median(plain),
            0.8,
            note,
        )
    ]
    report(figures, as_json=args.json, title="mcp: a tool call through plait's gates vs direct")


if __name__ == "__main__":
    asyncio.run(main())
