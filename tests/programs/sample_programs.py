"""Programs the tests run: registered by name, and referred to by import path."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

import plait
from plait.programs import AgentsCapability, DecisionsCapability, Payload, ProgramsCapability


class Target(BaseModel):
    """The input of ``sample-greet``."""

    name: str
    times: int = 1


class Greeting(BaseModel):
    """The output of ``sample-greet``."""

    text: str


@plait.program("sample-greet")
async def greet(input: Target) -> Greeting:
    """Greets ``input.name``, ``input.times`` times."""
    return Greeting(text=" ".join([f"hello {input.name}"] * input.times))


@plait.program("sample-raise")
async def raise_one(decisions: DecisionsCapability, payload: Payload) -> dict[str, Any]:
    """Raises one decision titled by the payload."""
    return await decisions.raise_(title=payload.title, id=payload.get("id"))


async def run_nested(programs: ProgramsCapability, payload: Payload) -> Any:
    """Runs the program ``payload.ref`` nested (an import-path program, unregistered)."""
    return await programs.run(payload.ref, payload.get("input"), require_promoted=True)


@plait.program("sample-spend")
async def spend(agents: AgentsCapability, payload: Payload) -> dict[str, Any]:
    """Runs task ``payload.task`` on agent ``payload.agent``, ``payload.times`` times."""
    texts = [(await agents.run(payload.task, agent=payload.agent))["text"]]
    for _ in range(payload.times - 1):
        texts.append((await agents.run(payload.task, agent=payload.agent))["text"])
    return {"texts": texts}
