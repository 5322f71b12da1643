"""``plait agents start|tell|list|show|stop|reset`` through the CLI runner, on a SQLite file
(nothing serves here: what is told stays in the backlog)."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import invoke


def test_start_tell_list_show_stop(mesh_args: list[str]) -> None:
    assert invoke("agents", "put", "worker", "--tools", "mesh_get,mesh_put", *mesh_args)[0] == 0
    code, out, err = invoke(
        "agents", "start", "w1", "--profile", "worker", "--topics", "tasks.new,jobs.*",
        "--max-concurrency", "2", "--tokens-per-day", "1000", *mesh_args,
    )  # fmt: skip
    assert code == 0, err
    assert "started agent:w1 (topics: tasks.new, jobs.*)" in out
    assert "no worker is serving this mesh" in err  # says nothing serves it yet
    code, out, err = invoke("agents", "tell", "w1", "do \x1b[2J this", *mesh_args)
    assert code == 0, err
    assert out.startswith("told agent:w1: message ")  # a labelled id
    message_id = out.split()[-1]

    code, out, _ = invoke("agents", "list", "--json", *mesh_args)
    listed = {a["name"]: a for a in json.loads(out)}
    assert "actor" not in listed["worker"]  # the profile itself does not run as an actor
    actor = listed["w1"]["actor"]
    assert actor["status"] == "running" and actor["backlog"] == 1
    assert actor["profile"] == "worker" and actor["max_concurrency"] == 2
    assert sorted(actor["topics"]) == ["jobs.*", "tasks.new"]
    code, out, _ = invoke("agents", "list", *mesh_args)
    assert code == 0
    profiles, actors = out.split("\n\n")  # a section each, under its own header
    assert profiles.splitlines()[0] == "profiles"
    assert profiles.splitlines()[1].split() == ["name", "model", "tools"]
    assert "worker" in [line.split()[0] for line in profiles.splitlines()[2:]]
    assert actors.splitlines()[0] == "actors"
    assert actors.splitlines()[1].split() == ["name", "profile", "status", "backlog", "topics"]
    assert actors.splitlines()[2].split()[:4] == ["w1", "worker", "running", "1"]

    code, out, _ = invoke("agents", "show", "w1", "--json", *mesh_args)
    shown = json.loads(out)["actor"]
    assert shown["messages"][0]["body"] == {"text": "do \x1b[2J this"}
    assert shown["last_turns"] == []
    code, out, _ = invoke("agents", "show", "w1", *mesh_args)
    assert code == 0 and message_id in out
    assert "\x1b" not in out and "\\u001b[2J" in out  # person data is shown escaped

    code, out, _ = invoke("agents", "stop", "w1", *mesh_args)
    assert code == 0
    code, out, _ = invoke("agents", "list", "--json", *mesh_args)
    stopped = {a["name"]: a for a in json.loads(out)}["w1"]["actor"]
    assert stopped["status"] == "stopped" and stopped["topics"] == []
    code, _, err = invoke("agents", "tell", "w1", "again", *mesh_args)
    assert code == 1 and "stopped" in err
    code, out, err = invoke("agents", "start", "w1", "--profile", "worker", *mesh_args)
    assert code == 0, err


def test_unknown_names_are_refused(mesh_args: list[str]) -> None:
    invoke("mesh", "put", "x", "1", *mesh_args)
    code, _, err = invoke("agents", "start", "ghost", *mesh_args)
    assert code == 1 and "unknown agent 'ghost'" in err
    code, _, err = invoke("agents", "tell", "ghost", "hi", *mesh_args)
    assert code == 1 and "no agent actor 'ghost'" in err
    code, _, err = invoke("agents", "start", "w", "--topics", "a*b", *mesh_args)
    assert code == 1


def test_untrusted_flags_and_json_output(mesh_args: list[str]) -> None:
    assert invoke("agents", "put", "reader", "--tools", "mesh_get", *mesh_args)[0] == 0
    code, out, err = invoke(
        "agents", "start", "reader", "--topics", "hooks.mail,tasks.new",
        "--untrusted-topics", "hooks.*", "--json", *mesh_args,
    )  # fmt: skip
    assert code == 0, err
    started = json.loads(out)
    assert started["id"] == "agent:reader" and started["status"] == "running"
    assert started["untrusted_topics"] == ["hooks.*"]
    code, out, err = invoke(
        "agents", "tell", "reader", "read this mail", "--untrusted", "--json", *mesh_args
    )
    assert code == 0, err
    told = json.loads(out)
    assert told["agent"] == "reader" and told["untrusted"] is True
    code, out, _ = invoke("agents", "show", "reader", "--json", *mesh_args)
    actor = json.loads(out)["actor"]
    (message,) = actor["messages"]
    assert message["body"] == {"text": "read this mail", "untrusted": True}
    assert actor["conversation_tainted"] is False  # no turn took the mail in yet
    code, out, _ = invoke("agents", "stop", "reader", "--json", *mesh_args)
    assert code == 0 and json.loads(out) == {
        "name": "reader",
        "id": "agent:reader",
        "status": "stopped",
    }


def test_bad_input_is_refused_with_one_line(mesh_args: list[str]) -> None:
    assert invoke("agents", "put", "w", "--tools", "mesh_get", *mesh_args)[0] == 0
    code, _, err = invoke("agents", "start", "w", "--on-indeterminate", "never", *mesh_args)
    assert code == 2 and "retry, skip, escalate" in err
    code, _, err = invoke("agents", "start", "w", "--window", "1", *mesh_args)
    assert code == 2
    code, _, err = invoke("agents", "show", "ghost", *mesh_args)
    assert code == 1 and "unknown agent 'ghost'" in err
    code, _, err = invoke("agents", "stop", "ghost", *mesh_args)
    assert code == 1 and "no agent actor 'ghost'" in err
    code, _, err = invoke("agents", "tell", "w", "\udcff", *mesh_args)
    assert code == 2 and "MESSAGE is not valid UTF-8" in err


def test_reset_is_a_persons_and_lets_the_conversation_go(
    mesh_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invoke("agents", "put", "worker", "--tools", "mesh_get", *mesh_args)[0] == 0
    assert invoke("agents", "start", "w1", "--profile", "worker", *mesh_args)[0] == 0
    code, out, err = invoke("agents", "reset", "w1", "--json", *mesh_args)
    assert code == 0, err
    assert json.loads(out) == {"name": "w1", "id": "agent:w1", "messages_dropped": 0}
    code, out, _ = invoke("agents", "reset", "w1", *mesh_args)
    assert code == 0 and "reset agent:w1: 0 message(s) let go, its taint cleared" in out
    code, _, err = invoke("agents", "reset", "ghost", *mesh_args)
    assert code == 1 and "no agent actor 'ghost'" in err
    monkeypatch.setenv("PLAIT_TOOL_PROCESS", "1")  # what a tool's process runs under
    code, _, err = invoke("agents", "reset", "w1", *mesh_args)
    assert code == 1 and "only a person may" in err


def test_an_exec_actor_starts_with_its_runner_and_instructions(mesh_args: list[str]) -> None:
    code, out, err = invoke(
        "agents", "start", "graph-r1", "--runner", "pi", "--instructions", "Run one node.",
        "--topics", "graph.r1", "--json", *mesh_args,
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["id"] == "agent:graph-r1"
    code, out, _ = invoke("mesh", "get", "actors/agent:graph-r1", "--json", *mesh_args)
    config = json.loads(out)["value"]["config"]
    assert config["runner"] == "pi" and config["instructions"] == "Run one node."
    code, _, err = invoke("agents", "start", "x", "--runner", "llm", *mesh_args)
    assert code == 2 and "model, pi" in err
