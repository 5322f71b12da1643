"""Starts llama-cpp-python's server with two chat formats of plait's own registered:
both show the model what its tool calls returned.

- ``chatml-function-calling-results``: llama-cpp-python's ``chatml-function-calling``
  (tools offered in the system turn, grammar-constrained calls), whose template renders a
  ``tool`` message as an empty turn: the model never sees a result, so with
  ``tool_choice: auto`` it calls the tool again. Here each result is a user turn.
- ``gemma-results``: Gemma's turns (``<start_of_turn>user`` / ``model``), the system
  message folded into the first user turn (Gemma has no system role; llama-cpp-python's
  ``gemma`` format drops it) and tool calls and results written out as turns.

Run: ``python bench/_llama_launch.py --model FILE --chat_format NAME ...`` (the server's
own options).
"""

from __future__ import annotations

from typing import Any

from llama_cpp import llama_chat_format as formats
from llama_cpp.server.__main__ import main


def _call_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {
        call.get("id", ""): call.get("function", {}).get("name", "the tool")
        for message in messages
        for call in message.get("tool_calls") or []
    }


def _results_as_user_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = _call_names(messages)
    shown: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "tool":
            name = names.get(message.get("tool_call_id") or "", "the tool")
            content = f"{name} returned: {message.get('content') or ''}"
            shown.append({"role": "user", "content": content})
        else:
            shown.append(message)
    return shown


@formats.register_chat_completion_handler("chatml-function-calling-results")
def chatml_function_calling_results(**kwargs: Any) -> Any:
    """``chatml-function-calling`` with each tool result shown as a user turn."""
    kwargs["messages"] = _results_as_user_turns(kwargs["messages"])
    return formats.chatml_function_calling(**kwargs)


def _gemma_text(message: dict[str, Any]) -> str:
    text = message.get("content") or ""
    calls = [
        f"{call['function']['name']}({call['function']['arguments']})"
        for call in message.get("tool_calls") or []
    ]
    return "\n".join([text, *[f"Calling {c}" for c in calls]] if calls else [text]).strip()


@formats.register_chat_format("gemma-results")
def format_gemma_results(
    messages: list[dict[str, Any]], **kwargs: Any
) -> formats.ChatFormatterResponse:
    """Gemma's turns with the system message and tool results kept."""
    system = "\n\n".join(m.get("content") or "" for m in messages if m["role"] == "system")
    turns: list[tuple[str, str]] = []
    for message in _results_as_user_turns([m for m in messages if m["role"] != "system"]):
        role = "model" if message["role"] == "assistant" else "user"
        text = _gemma_text(message)
        if turns and turns[-1][0] == role:  # Gemma's turns alternate
            turns[-1] = (role, f"{turns[-1][1]}\n\n{text}")
        else:
            turns.append((role, text))
    if system and turns and turns[0][0] == "user":
        turns[0] = ("user", f"{system}\n\n{turns[0][1]}")
    prompt = "".join(f"<start_of_turn>{role}\n{text}<end_of_turn>\n" for role, text in turns)
    return formats.ChatFormatterResponse(
        prompt=f"{prompt}<start_of_turn>model\n", stop="<end_of_turn>"
    )


if __name__ == "__main__":
    main()
