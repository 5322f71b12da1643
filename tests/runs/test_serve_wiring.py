"""A serving process is built in one place: ``serve()`` is handed the programs it runs
by name and the actor kinds it runs, and looks nothing up in a process-global table."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import plait
from plait.actors import ActorContext, ActorKind, Mail
from plait.mesh import Mesh, open_mesh
from plait.programs import DEFAULT_CATALOG, ProgramCatalog
from plait.runs import OwnerServices, Runs, RunServices, serve
from tests.runs.helpers import settle, store

pytestmark = pytest.mark.anyio

ONLY_IN_THE_DEFAULT = "wiring-only-in-the-default-catalog"


@plait.program(ONLY_IN_THE_DEFAULT)
async def _collected(input: Any) -> str:
    return "from the default catalog"


def greeting(ref: str) -> dict[str, Any]:
    return {
        "name": "greeting",
        "agent": "assistant",
        "entry": "greet",
        "nodes": [{"id": "greet", "type": "program", "ref": ref, "input": "{{input}}"}],
    }


def catalog(word: str) -> ProgramCatalog:
    programs = ProgramCatalog()

    @programs.program("greet")
    async def greet(input: Any) -> str:
        return f"{word} {input}"

    return programs


async def run(mesh: Mesh, text: str) -> tuple[str, Any]:
    runs = Runs(mesh)
    rec = await runs.start("assistant", "greeting", input=text)
    done = await settle(runs, rec.run_id)
    return done.status, (await runs.output(done)) if done.status == "done" else done.error


async def test_two_meshes_served_in_one_process_each_run_their_own_programs() -> None:
    async with open_mesh("memory://") as one, open_mesh("memory://") as two:
        await store(one, greeting("greet"))
        await store(two, greeting("greet"))
        async with (
            serve(one, programs=catalog("hello"), beat=False),
            serve(two, programs=catalog("bonjour"), beat=False),
        ):
            assert await run(one, "ana") == ("done", "hello ana")
            assert await run(two, "ana") == ("done", "bonjour ana")
    assert "greet" not in DEFAULT_CATALOG  # neither catalog leaked into the process's


async def test_a_program_only_the_default_catalog_holds_is_not_found_by_another() -> None:
    assert ONLY_IN_THE_DEFAULT in DEFAULT_CATALOG
    async with open_mesh("memory://") as mesh:
        await store(mesh, greeting(ONLY_IN_THE_DEFAULT))
        async with serve(mesh, programs=catalog("hello"), beat=False):
            status, error = await run(mesh, "ana")
        assert status == "failed" and ONLY_IN_THE_DEFAULT in str(error)
        # handed the default catalog (as the CLI does), the same process finds it
        async with serve(mesh, programs=DEFAULT_CATALOG, beat=False):
            assert await run(mesh, "bo") == ("done", "from the default catalog")


async def test_serve_hands_its_actors_one_run_services_and_runs_the_kinds_it_is_given() -> None:
    seen: list[RunServices] = []
    both = anyio.Event()

    async def probe(ctx: ActorContext, mail: Mail) -> None:
        services = ctx.service(RunServices)
        assert ctx.service(OwnerServices) is services.owner_services  # a run owner's view: its part
        seen.append(services)
        if len(seen) == 2:
            both.set()

    async with (
        open_mesh("memory://") as mesh,
        serve(mesh, kinds={"wiring.probe": ActorKind(probe)}, beat=False) as serving,
    ):
        await serving.runtime.create("p", "wiring.probe")
        await serving.runtime.tell("p", {"n": 1})
        await serving.runtime.tell("p", {"n": 2})
        await both.wait()
    assert seen == [serving.services, serving.services]
    assert serving.services.programs is DEFAULT_CATALOG
