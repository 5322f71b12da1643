"""What a token's caller may make the server do, and may not: read files through a
scripted model, import modules through a program ref, learn where the mesh lives."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plait.api.app import MAX_BODY_BYTES
from plait.mesh import Mesh

from .helpers import api_client, asking_graph

pytestmark = pytest.mark.anyio

START = {"agent": "assistant", "name": "review", "input": "x"}


async def test_a_scripted_model_is_read_only_from_the_configured_folder(
    mesh: Mesh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLAIT_SCRIPTED_DIR", raising=False)
    async with api_client(mesh, "service", "ci") as bot:
        assert (await bot.post("/api/graphs", json=asking_graph())).status_code == 201
        off = await bot.post("/api/runs", json={**START, "model": "scripted:/dev/zero"})
        assert off.status_code == 422, off.text
        assert "PLAIT_SCRIPTED_DIR names, and it is unset" in off.json()["detail"]

    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "ok.yaml").write_text("- text: ok\n")
    (scripts / "broken.yaml").write_text("token: hunter2-secret\nrules: [x\n")
    monkeypatch.setenv("PLAIT_SCRIPTED_DIR", str(scripts))
    async with api_client(mesh, "service", "ci") as bot:
        for outside in ("/dev/zero", "/etc/passwd", "../scripts/../../x.yaml"):
            refused = await bot.post("/api/runs", json={**START, "model": f"scripted:{outside}"})
            assert refused.status_code == 422, refused.text
            assert "outside the server's PLAIT_SCRIPTED_DIR" in refused.json()["detail"]
        broken = await bot.post("/api/runs", json={**START, "model": "scripted:broken.yaml"})
        assert broken.status_code == 422
        detail = broken.json()["detail"]
        assert detail.startswith("$PLAIT_SCRIPTED_DIR/broken.yaml: not valid JSON or YAML")
        assert "hunter2" not in broken.text and str(scripts) not in broken.text
        assert (await bot.get("/api/runs")).json()["total"] == 0  # nothing started
        started = await bot.post("/api/runs", json={**START, "model": "scripted:ok.yaml"})
        assert started.status_code == 201, started.text


async def test_a_schedule_takes_a_scripted_model_only_from_the_configured_folder(
    mesh: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLAIT_SCRIPTED_DIR", raising=False)
    async with api_client(mesh) as ana:
        assert (await ana.post("/api/graphs", json=asking_graph())).status_code == 201
        body = {"agent": "assistant", "name": "review", "cron": "0 8 * * 1", "deliver": "stdout"}
        refused = await ana.post("/api/schedules", json={**body, "model": "scripted:/dev/zero"})
        assert refused.status_code == 422, refused.text
        assert "PLAIT_SCRIPTED_DIR" in refused.json()["detail"]


async def test_a_problem_names_neither_the_mesh_nor_its_file(mesh: Mesh) -> None:
    async with api_client(mesh, "service", "ci") as bot:
        for path in ("/api/runs/grun_nope", "/api/runs/grun_nope/trajectory"):
            missing = await bot.get(path)
            assert missing.status_code == 404
            detail = missing.json()["detail"]
            assert detail == "no run 'grun_nope' in the mesh", detail
            assert mesh.url not in missing.text
        graph = await bot.get("/api/graphs/assistant/nope")
        assert graph.status_code == 404 and mesh.url not in graph.text
        schedule = await bot.get("/api/schedules/nope")
        assert schedule.status_code == 404 and mesh.url not in schedule.text


def _program_graph(ref: str) -> dict[str, object]:
    return {
        "name": "prog",
        "agent": "assistant",
        "entry": "p",
        "nodes": [{"id": "p", "type": "program", "ref": ref}],
    }


async def test_importing_a_graph_imports_no_module_its_program_ref_names(
    mesh: Mesh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "plait_probe_module.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('yes')\n"
        "async def run(input):\n    return input\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    async with api_client(mesh, "service", "ci") as bot:
        stored = await bot.post("/api/graphs", json=_program_graph("plait_probe_module:run"))
        assert stored.status_code == 201, stored.text
        assert not marker.exists()  # checked as text; only running it imports the module
        for ref, why in [
            (".:x", "is not of the form pkg.module:function"),
            ("..os:system", "is not of the form pkg.module:function"),
            ("os:", "is not of the form pkg.module:function"),
        ]:
            refused = await bot.post("/api/graphs", json=_program_graph(ref))
            assert refused.status_code == 422, refused.text
            assert why in refused.text
        loaded = await bot.post("/api/graphs", json=_program_graph("json:nothing_here"))
        assert loaded.status_code == 422  # a module loaded already is looked into
        assert "json has no nothing_here" in loaded.text


async def test_a_number_over_the_digit_limit_is_a_422_not_a_crash(mesh: Mesh) -> None:
    body = '{"name": "g", "entry": "a", "budget": ' + "9" * 5000 + ', "nodes": []}'
    async with api_client(mesh, "service", "ci") as bot:
        refused = await bot.post(
            "/api/graphs", content=body, headers={"Content-Type": "application/json"}
        )
    assert refused.status_code == 422, refused.text  # the API answers no 400
    assert refused.headers["content-type"] == "application/problem+json"


async def test_a_request_body_over_the_limit_is_a_413_before_it_is_parsed(mesh: Mesh) -> None:
    graph = {"name": "g", "entry": "a", "nodes": [{"id": "a", "type": "agent",
             "prompt": "{{" * MAX_BODY_BYTES}]}  # fmt: skip
    body = json.dumps(graph).encode()

    async def chunks() -> AsyncIterator[bytes]:  # sent with no Content-Length
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    async with api_client(mesh, "service", "ci") as bot:
        declared = await bot.post("/api/graphs", content=body)
        streamed = await bot.post("/api/graphs", content=chunks())
        small = await bot.post("/api/graphs", json={**graph, "nodes": [
            {"id": "a", "type": "agent", "prompt": "{{" * 60_000}]})  # fmt: skip
    for refused in (declared, streamed):
        assert refused.status_code == 413, refused.text
        assert (
            refused.json()["detail"]
            == f"the request body is over the limit of {MAX_BODY_BYTES} bytes"
        )
    assert small.status_code == 422  # under the body limit, over the template cap
    assert "is over the cap of 100000" in small.json()["detail"] + str(small.json()["problems"])
