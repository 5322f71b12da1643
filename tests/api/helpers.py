"""Helpers of the API tests: a graph that asks a person, its model, an API client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import jsonschema
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from plait.api.app import create_app
from plait.api.tokens import create_token
from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
"""Run data that would run code if a page rendered it as HTML."""


def asking_graph(name: str = "review", ask: str = "Ship {{draft}}?") -> dict[str, Any]:
    """draft (agent) -> approve (human) -> ship (agent)."""
    return {
        "name": name,
        "agent": "assistant",
        "entry": "draft",
        "nodes": [
            {"id": "draft", "type": "agent", "prompt": "Draft {{input}}", "next": "approve"},
            {"id": "approve", "type": "human", "ask": ask, "options": ["approve", "reject"],
             "next": "ship"},
            {"id": "ship", "type": "agent", "prompt": "Ship {{draft}} ({{approve}})"},
        ],
    }  # fmt: skip


def asking_rules(draft: str = "v2 notes") -> list[dict[str, Any]]:
    """The scripted model of :func:`asking_graph`: it drafts, and ships once approved."""
    return [{"node": "draft", "text": draft}, {"node": "ship", "text": "shipped"}]


def asking_model(draft: str = "v2 notes") -> ScriptedModel:
    """:func:`asking_rules` as a model."""
    return ScriptedModel(asking_rules(draft))


@asynccontextmanager
async def api_client(
    mesh: Mesh, kind: str = "human", name: str = "ana"
) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client of the app over ``mesh`` (in process), with a fresh token."""
    _, token = await create_token(mesh, kind, name)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=create_app(mesh))
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://plait.test",
        headers={"Authorization": f"Bearer {token}"},
    ) as client:
        yield client


def with_token(client: httpx.AsyncClient, token: str | None) -> dict[str, str]:
    """Headers that replace the client's token (none at all for None)."""
    return {"Authorization": f"Bearer {token}"} if token else {"Authorization": ""}


def spec_validator(spec: dict[str, Any], schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator of ``schema``, its ``#/components/...`` references read from the
    OpenAPI document ``spec``."""
    registry = Registry().with_resource("spec", DRAFT202012.create_resource(spec))
    rebased = json.loads(json.dumps(schema).replace('"#/components/', '"spec#/components/'))
    return jsonschema.Draft202012Validator(rebased, registry=registry)


def check_run_event(spec: dict[str, Any], event: dict[str, str]) -> None:
    """Check one server-sent event of a run (``event``, ``data`` as sent, ``id`` if
    any) against the served spec: the event's schema, then its data's."""
    media = spec["paths"]["/api/runs/{run_id}/events"]["get"]["responses"]["200"]["content"]
    spec_validator(spec, media["text/event-stream"]["itemSchema"]).validate(event)
    kinds = spec["components"]["schemas"]["RunEvent"]["oneOf"]
    kind = next(k for k in kinds if k["properties"]["event"]["const"] == event["event"])
    data = kind["properties"]["data"]["contentSchema"]
    spec_validator(spec, data).validate(json.loads(event["data"]))
