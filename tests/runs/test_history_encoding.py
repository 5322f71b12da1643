"""A visit's messages are stored as each one's model_dump gives them, whichever path dumps them."""

from __future__ import annotations

from plait.models import Message, ToolCall
from plait.runs.mesh_ports import dump_messages


def test_text_messages_are_stored_as_model_dump_gives_them() -> None:
    messages = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Draft {{x}}"),
        Message(role="assistant", content=""),
        Message(role="tool", content="42", tool_call_id="call_1"),
    ]
    assert dump_messages(messages) == [m.model_dump() for m in messages]
    assert [list(d) for d in dump_messages(messages)] == [list(m.model_dump()) for m in messages]


def test_messages_with_tool_calls_are_stored_as_model_dump_gives_them() -> None:
    call = ToolCall(id="call_1", name="search", arguments={"q": "plait"})
    messages = [
        Message(role="user", content="Look it up"),
        Message(role="assistant", content="", tool_calls=[call]),
    ]
    assert dump_messages(messages) == [m.model_dump() for m in messages]
    loaded = [Message.model_validate(d) for d in dump_messages(messages)]
    assert loaded == messages
