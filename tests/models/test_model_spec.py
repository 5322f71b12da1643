"""A bad model spec is refused before anything runs: one line that says how to fix it."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.errors import ConfigError
from plait.models import check_model_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("gpt-4o", "expected PREFIX:NAME"),
        ("openai:", "expected PREFIX:NAME"),
        ("scripted:nosuch.yaml", "cannot read the scripted model file nosuch.yaml"),
        ("anthropic:claude-x", "set ANTHROPIC_API_KEY"),
        ("openai:gpt-x", "set OPENAI_API_KEY"),
    ],
)
def test_check_model_spec_refuses_what_cannot_work(spec: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_model_spec(spec)
    assert says in str(info.value)
    assert "\n" not in str(info.value)


def test_check_model_spec_accepts_what_can(monkeypatch: pytest.MonkeyPatch) -> None:
    check_model_spec(f"scripted:{EXAMPLES / 'research_and_verify.model.yaml'}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    check_model_spec("anthropic:claude-x")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    check_model_spec("openai:local")
