"""``serve_flows.py URL``: a serving process for the crash tests, in its working
directory (the runs' workspace): writes its pid to ``server.pid``, then serves every
run of the mesh at URL with a scripted model until it is killed or SIGTERMed."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from plait.agents import Agents
from plait.mesh import open_mesh
from plait.models import ScriptedModel
from plait.runs import serve


async def main(url: str) -> None:
    """Serve until SIGTERM."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    Path("server.pid").write_text(str(os.getpid()))
    model = ScriptedModel([{"text": "LGTM"}])
    async with (
        open_mesh(url) as mesh,
        serve(mesh, model=model, agents=Agents, visibility_timeout_ms=1000, beat=False),
    ):
        print("serving", flush=True)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
