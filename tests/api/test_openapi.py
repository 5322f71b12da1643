"""The served OpenAPI spec, checked with schemathesis against a running ``plait serve``:
no server error, and every response (status, content type, headers, body, event stream)
as the spec says, over generated requests and over walks along the spec's links."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .helpers import asking_graph, asking_rules, check_run_event, spec_validator
from .server import Served, serving

schemathesis = pytest.importorskip("schemathesis", reason="needs schemathesis (dev extra)")
from schemathesis.engine import events, from_schema  # noqa: E402

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 4
"""Examples per operation and phase: enough to cross each schema's edges, few enough to
run in seconds on a busy machine."""

SEMANTIC = [
    ("/api/graphs", "POST", "a graph's structure: its entry, targets, agents and tools"),
    ("/api/runs", "POST", "a model spec that names a provider"),
    ("/api/runs/{run_id}/fork", "POST", "a visit the run committed"),
    ("/api/runs/{run_id}/resume", "POST", "an answer that fits what the run asks"),
    ("/api/decisions/{decision_id}/answer", "POST", "an option the decision offers"),
    ("/api/schedules", "POST", "a cron expression's ranges, a time zone, a sink"),
]
"""Operations whose schema-valid input may still not work, for a reason no schema says:
the API answers those with a 422 naming it, which positive_data_acceptance allows here."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server with a stored graph and one run that waits on a person."""
    with serving(tmp_path_factory.mktemp("openapi"), asking_rules()) as server:
        server.client.post("/api/graphs", json=asking_graph()).raise_for_status()
        body = {"agent": "assistant", "name": "review", "input": "x"}
        server.client.post("/api/runs", json=body).raise_for_status()
        yield server


def _config(token: str) -> Any:
    semantic = {"positive_data_acceptance": {"expected-statuses": ["2xx", 401, 403, 404, 409, 422]}}
    return schemathesis.Config.from_dict(
        {
            "headers": {"Authorization": f"Bearer {token}"},
            "seed": 30,  # the same requests on every run: a failure here reproduces
            "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
            "request-timeout": 30,
            "continue-on-failure": True,
            "phases": {"stateful": {"enabled": True, "max-steps": 30}},
            "operations": [
                *(
                    {"include-path": path, "include-method": method, "checks": semantic}
                    for path, method, _ in SEMANTIC
                ),
                # A graph file's schema (a dozen node kinds) takes longer to cover edge by
                # edge than the rest of the API together: fuzzed only, and briefly.
                {
                    "include-path": "/api/graphs",
                    "include-method": "POST",
                    "checks": semantic,
                    "generation": {"max-examples": 2},
                    "phases": {"coverage": {"enabled": False}},
                },
            ],
        }
    )


def test_the_api_keeps_to_its_spec(served: Served) -> None:
    """Every phase (examples, coverage, fuzzing, stateful), every check on."""
    schema = schemathesis.openapi.from_url(
        served.url + "/openapi.json", config=_config(served.token)
    )
    # The runs feed follows every run until its client goes: a stream with no end that no
    # generated request closes. tests/api/test_runs_feed.py checks its frames against
    # this spec instead.
    schema = schema.exclude(path="/api/runs/events", method="GET")
    failures: dict[tuple[str, str, str], str] = {}
    errors: list[str] = []
    phases: dict[str, str] = {}
    walked: set[str] = set()  # operations the stateful phase reached along a link, answered 2xx
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            if event.phase.value == "stateful":
                walked |= _walked(event.recorder)
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    if check.failure_info is None:
                        continue
                    failure = check.failure_info.failure
                    case = event.recorder.cases[case_id].value
                    key = (event.phase.value, f"{case.method} {case.path}", check.name)
                    failures.setdefault(key, f"{failure.title}: {failure.message}")
        elif isinstance(event, events.NonFatalError | events.FatalError):
            errors.append(str(event.info) if hasattr(event, "info") else repr(event))
        elif isinstance(event, events.PhaseFinished):
            phases[event.phase.name.value] = event.status.value
    assert not errors, errors
    assert not failures, "\n".join(f"{k}: {v}" for k, v in failures.items())
    for phase in ("coverage", "fuzzing", "stateful"):
        assert phases.get(phase) == "success", phases
    # The seeded run is reached from the runs page, and its reads from it.
    assert {"GET /api/runs/{run_id}", "GET /api/runs/{run_id}/trajectory"} <= walked, walked


def _walked(recorder: Any) -> set[str]:
    """The operations of a stateful scenario called along a link and answered 2xx."""
    found = set()
    for case_id, node in recorder.cases.items():
        interaction = recorder.interactions.get(case_id)
        response = interaction.response if interaction is not None else None
        if node.transition is not None and response is not None and response.status_code < 300:
            found.add(f"{node.value.method} {node.value.path}")
    return found


def test_a_node_kind_of_the_wrong_type_is_a_422(served: Served) -> None:
    graph = asking_graph("kinds")
    for kind in ({}, [], 3):
        graph["nodes"][0] = {"id": "draft", "type": "agent", "kind": kind, "prompt": "x"}
        refused = served.client.post("/api/graphs", json=graph)
        assert refused.status_code == 422, refused.text
        assert "disagree" in refused.text


def test_the_spec_is_served(served: Served) -> None:
    spec = served.client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert "/api/runs/{run_id}/events" in spec["paths"]
    assert "Problem" in spec["components"]["schemas"]


def _spec(served: Served) -> dict[str, Any]:
    spec: dict[str, Any] = served.client.get("/openapi.json").json()
    return spec


def _body_schema(spec: dict[str, Any], path: str, method: str = "post") -> dict[str, Any]:
    body = spec["paths"][path][method]["requestBody"]
    assert body["required"] is True
    schema: dict[str, Any] = body["content"]["application/json"]["schema"]
    return schema


def test_request_schemas_mark_what_the_server_requires(served: Served) -> None:
    """A body the spec calls valid is one the server does not refuse for its shape."""
    spec = _spec(served)
    for path in ("/api/graphs", "/api/runs", "/api/schedules", "/api/runs/{run_id}/fork"):
        assert not spec_validator(spec, _body_schema(spec, path)).is_valid({}), path
        concrete = path.replace("{run_id}", "grun_x")
        refused = served.client.post(concrete, json={})
        assert refused.status_code == 422, (path, refused.text)
    answer = spec_validator(spec, _body_schema(spec, "/api/decisions/{decision_id}/answer"))
    assert not answer.is_valid({}) and not answer.is_valid({"option": None})
    assert answer.is_valid({"text": "fine"})
    budget = spec_validator(spec, _body_schema(spec, "/api/runs/{run_id}/budget"))
    assert not budget.is_valid({}) and budget.is_valid({"steps": 3})
    assert spec_validator(spec, _body_schema(spec, "/api/graphs")).is_valid(asking_graph())
    # Types are kept: what the schema calls no boolean is no boolean to the server.
    run = served.client.get("/api/runs").json()["items"][0]["run_id"]
    coerced = served.client.post(f"/api/runs/{run}/budget", json={"steps": "3"})
    assert coerced.status_code == 422, coerced.text


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe not utf-8", b'{"steps": ' + b"9" * 5000 + b"}", b"{not json"],
    ids=["not-utf8", "digits", "syntax"],
)
def test_a_body_that_is_not_json_is_a_422_on_every_post(served: Served, body: bytes) -> None:
    spec = _spec(served)
    run = served.client.get("/api/runs").json()["items"][0]["run_id"]
    posts = [path for path, item in spec["paths"].items() if "requestBody" in item.get("post", {})]
    assert len(posts) >= 6, posts
    for path in posts:
        assert "400" not in spec["paths"][path]["post"]["responses"], path
        assert "422" in spec["paths"][path]["post"]["responses"], path
        concrete = (
            path.replace("{run_id}", run)
            .replace("{decision_id}", "d")
            .replace("{schedule_id}", "sch_0000000000")
        )
        answer = served.client.post(
            concrete, content=body, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 422, (path, answer.status_code, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
        if path == "/api/graphs":
            assert "not valid JSON" in answer.json()["detail"] or "JSON" in answer.text


def test_a_405_names_every_method_of_its_path(served: Served) -> None:
    spec = _spec(served)
    for path, item in spec["paths"].items():
        documented = {verb.upper() for verb in item if verb in ("get", "post", "delete")}
        concrete = path.replace("{run_id}", "grun_x").replace("{decision_id}", "d")
        concrete = concrete.replace("{schedule_id}", "s").replace("{agent}/{name}", "a/b")
        refused = served.client.request("PATCH", concrete)
        assert refused.status_code == 405, path
        assert set(refused.headers["allow"].split(", ")) == documented, path
        assert refused.headers["content-type"] == "application/problem+json"


def test_links_lead_from_a_created_run_to_its_reads_and_acts(served: Served) -> None:
    spec = _spec(served)
    by_id = {
        op["operationId"]: (path, verb)
        for path, item in spec["paths"].items()
        for verb, op in item.items()
    }
    created = spec["paths"]["/api/runs"]["post"]["responses"]["201"]["links"]
    reached = {by_id[link["operationId"]] for link in created.values()}
    for path in ("/api/runs/{run_id}", "/api/runs/{run_id}/events"):
        assert (path, "get") in reached
    for act in ("fork", "resume", "cancel", "retry", "budget"):
        assert (f"/api/runs/{{run_id}}/{act}", "post") in reached
    for link in created.values():
        path, _ = by_id[link["operationId"]]
        if "{run_id}" in path:
            assert link["parameters"] == {"run_id": "$response.body#/run_id"}
        else:  # the schedule that started the run, when one did
            assert path.startswith("/api/schedules/{schedule_id}")
            assert link["parameters"] == {"schedule_id": "$response.body#/schedule_id"}
    schedule = spec["paths"]["/api/schedules"]["post"]["responses"]["201"]["links"]
    assert ("/api/schedules/{schedule_id}", "delete") in {
        by_id[link["operationId"]] for link in schedule.values()
    }
    fork = spec["paths"]["/api/runs/{run_id}/fork"]["post"]["responses"]["201"]["links"]
    assert len(fork) == len(created)
    listed = spec["paths"]["/api/runs"]["get"]["responses"]["200"]["links"]  # a page's first
    assert {
        link["parameters"]["run_id"]
        for link in listed.values()
        if "{run_id}" in by_id[link["operationId"]][0]
    } == {"$response.body#/items/0/run_id"}
    assert all(
        link["parameters"] == {"schedule_id": "$response.body#/items/0/schedule_id"}
        for link in listed.values()
        if "{run_id}" not in by_id[link["operationId"]][0]
    )
    assert len(listed) == len(created)
    decisions = spec["paths"]["/api/decisions"]["get"]["responses"]["200"]["links"]
    assert any(
        link["parameters"] == {"decision_id": "$response.body#/0/id"} for link in decisions.values()
    )


def _sse(text: str) -> list[dict[str, str]]:
    """The events of a server-sent event stream, as schemathesis and OpenAPI 3.2 read them."""
    found = []
    for block in text.split("\n\n"):
        event: dict[str, str] = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            field, _, value = line.partition(": ")
            event[field] = value
        if "data" in event:
            found.append(event)
    return found


def test_the_run_events_are_documented_as_they_are_sent(served: Served) -> None:
    spec = _spec(served)
    response = spec["paths"]["/api/runs/{run_id}/events"]["get"]["responses"]["200"]
    media = response["content"]["text/event-stream"]
    each = spec_validator(spec, media["itemSchema"])
    names = {
        s["properties"]["event"]["const"]
        for s in spec["components"]["schemas"]["RunEvent"]["oneOf"]
    }
    assert names == {"progress", "attempt", "delta", "settled"}
    body = {"agent": "assistant", "name": "review", "input": "events"}
    run = served.client.post("/api/runs", json=body).json()["run_id"]
    with served.client.stream("GET", f"/api/runs/{run}/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        sent = _sse(stream.read().decode())
    assert [e["event"] for e in sent][-1] == "settled"
    assert json.loads(sent[-1]["data"])["status"] == "waiting_human"
    for event in sent:
        check_run_event(spec, event)
    assert not each.is_valid({"event": "settled", "data": "{}"} | {"id": "x"})


def test_documented_problem_statuses_come_as_problem_json(served: Served) -> None:
    unknown = served.client.get("/api/runs/grun_nothing")
    assert unknown.status_code == 404
    assert unknown.headers["content-type"] == "application/problem+json"
    anonymous = httpx.get(served.url + "/api/runs")
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert anonymous.headers["content-type"] == "application/problem+json"
