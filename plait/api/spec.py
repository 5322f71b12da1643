"""The served OpenAPI document, made to say what the server does.

FastAPI writes the document from the routes; :func:`install_spec` completes it, once,
for every route alike (a new route gets the same):

- the ``Problem`` schema every error response refers to;
- 413 on every operation with a request body (:class:`~plait.api.app.BodyLimit`),
  503 on every operation that reads the mesh (a mesh that does not answer), a 401's
  ``WWW-Authenticate``, and no 422 on an operation that takes no input;
- an optional parameter's schema without its ``null``: a query string or a header
  carries no null, it is left out (FastAPI writes ``int | None`` as either);
- links from each operation's answer to the operations its fields address: a response
  whose schema has ``run_id`` links to every operation under ``{run_id}``, a ``Schedule``'s
  ``id`` to every one under ``{schedule_id}``, and so on, so a client (or a stateful
  test) walks from a created run to its reads and acts.

A request body that is not JSON is invalid input like one that does not fit its schema:
422, never 400 (see :func:`plait.api.problems.install_problem_handlers`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from plait.api.problems import Problem, problem_responses

_REF = "#/components/schemas/"
_PARAM = re.compile(r"\{([^}]+)\}")
_VERBS = ("get", "put", "post", "delete", "patch")

Spec = dict[str, Any]
"""An OpenAPI document, as JSON."""


def add_schema(spec: Spec, name: str, schema: dict[str, Any]) -> str:
    """Put ``schema`` (with its ``$defs``) in the spec's components; its ``$ref``.

    Raises:
        ValueError: a component of the same name is already there, and differs.
    """
    schema = dict(schema)
    defs = schema.pop("$defs", {})
    components = spec.setdefault("components", {}).setdefault("schemas", {})
    for key, value in [*defs.items(), (name, schema)]:
        value = _rebased(value)
        if components.setdefault(key, value) != value:
            raise ValueError(f"two different schemas are named {key!r} in the OpenAPI spec")
    return _REF + name


def add_model(spec: Spec, model: type[BaseModel]) -> str:
    """Put ``model``'s JSON schema in the spec's components; its ``$ref``."""
    schema = model.model_json_schema(ref_template=_REF + "{model}")
    return add_schema(spec, model.__name__, schema)


def _rebased(value: Any) -> Any:
    """``value`` with its ``#/$defs/`` references made component references."""
    if isinstance(value, dict):
        return {
            k: (_REF + v[len("#/$defs/") :])
            if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/")
            else _rebased(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_rebased(v) for v in value]
    return value


def operations(spec: Spec) -> list[tuple[str, str, dict[str, Any]]]:
    """Every operation of the spec: its path, method and object."""
    return [
        (path, verb, item[verb])
        for path, item in spec.get("paths", {}).items()
        for verb in _VERBS
        if verb in item
    ]


def _schema_of(spec: Spec, schema: dict[str, Any]) -> dict[str, Any]:
    """The schema ``schema`` refers to (itself when it is no reference)."""
    ref = schema.get("$ref", "")
    if isinstance(ref, str) and ref.startswith(_REF):
        found: dict[str, Any] = spec["components"]["schemas"][ref[len(_REF) :]]
        return found
    return schema


def _fields_for(name: str) -> Callable[[str], str | None]:
    """How a response schema named ``name`` addresses path parameters: by a field of the
    parameter's own name, and by ``id`` for ``<name>_id`` (``Schedule.id``: ``schedule_id``)."""
    own_id = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() + "_id"

    def field(param: str) -> str | None:
        return "id" if param == own_id else param

    return field


def _addressed(spec: Spec, schema: dict[str, Any]) -> tuple[str, str] | None:
    """Where a response names one resource: the JSON pointer to it, and its schema's
    name: the body itself, the first of a list, or the first ``items`` of a page."""
    ref = schema.get("$ref", "")
    if ref.startswith(_REF):
        page = _schema_of(spec, schema).get("properties", {}).get("items", {})
        inner = _addressed(spec, page) if page.get("type") == "array" else None
        if inner is not None and inner[0] == "/0":
            return "/items/0", inner[1]
        return "", ref[len(_REF) :]
    items = schema.get("items", {})
    if schema.get("type") == "array" and str(items.get("$ref", "")).startswith(_REF):
        return "/0", items["$ref"][len(_REF) :]
    return None


def _link(spec: Spec) -> None:
    """Add the links from each 2xx JSON response to the operations its fields address
    (from a list or a page, by its first item)."""
    targets = [(path, op, _PARAM.findall(path)) for path, _, op in operations(spec) if "{" in path]
    for _, _, op in operations(spec):
        for status, response in op.get("responses", {}).items():
            content = response.get("content", {}).get("application/json")
            if not str(status).startswith("2") or content is None:
                continue
            found = _addressed(spec, content.get("schema", {}))
            if found is None:
                continue
            pointer, name = found
            field = _fields_for(name)
            props = spec["components"]["schemas"][name].get("properties", {})
            links = response.setdefault("links", {})
            for _path, target, params in targets:
                fields = {param: field(param) for param in params}
                if all(f in props for f in fields.values()):
                    links[target["operationId"]] = {
                        "operationId": target["operationId"],
                        "parameters": {
                            p: f"$response.body#{pointer}/{f}" for p, f in fields.items()
                        },
                    }
            if not links:
                del response["links"]


def _absent_not_null(spec: Spec) -> None:
    """Take ``null`` out of each optional parameter's schema (see the module docstring)."""
    for _, _, op in operations(spec):
        for param in op.get("parameters", []):
            schema = param.get("schema", {})
            branches = schema.get("anyOf")
            if param.get("required") or not isinstance(branches, list):
                continue
            kept = [b for b in branches if b != {"type": "null"}]
            if len(kept) < len(branches):
                del schema["anyOf"]
                schema.update(kept[0] if len(kept) == 1 else {"anyOf": kept})


_CHALLENGE = {
    "WWW-Authenticate": {
        "description": "Bearer, and why the token was refused when one was sent.",
        "required": True,
        "schema": {"type": "string", "pattern": "^Bearer"},
    }
}


def _common_responses(spec: Spec) -> None:
    """413 where a body is read, 503 wherever the mesh is read (every secured operation),
    a 401's challenge header; no 422 where there is no input to refuse."""
    for _, _, op in operations(spec):
        responses = op.setdefault("responses", {})
        extra: tuple[int, ...] = (413,) if "requestBody" in op else ()
        extra += (503,) if op.get("security") else ()
        for status, doc in problem_responses(*extra).items():
            responses.setdefault(str(status), doc)
        if "401" in responses:
            responses["401"] = {**responses["401"], "headers": _CHALLENGE}
        if not op.get("parameters") and "requestBody" not in op:
            responses.pop("422", None)


def install_spec(app: FastAPI, *complete: Callable[[Spec], None]) -> None:
    """Serve ``app``'s spec completed as the module docstring says, then by ``complete``."""
    base = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = base()
            add_model(spec, Problem)
            for step in (*complete, _absent_not_null, _common_responses, _link):
                step(spec)
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


__all__ = ["Spec", "add_model", "add_schema", "install_spec", "operations"]
