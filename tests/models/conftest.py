"""Fixtures for the model adapter tests: fake provider servers, a clean environment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .wire_servers import AnthropicWireServer, OpenAIWireServer

PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
)


@pytest.fixture(autouse=True)
def clean_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here reads a real key or endpoint from the environment."""
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def openai_server() -> Iterator[OpenAIWireServer]:
    """A fake OpenAI chat completions server, stopped after the test."""
    with OpenAIWireServer() as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicWireServer]:
    """A fake Anthropic Messages server, stopped after the test."""
    with AnthropicWireServer() as server:
        yield server
