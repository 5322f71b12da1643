"""A deterministic model for tests and examples: answers come from a list of rules.

A rule file is JSON or YAML, either ``{"rules": [...]}`` or a bare list of rules. Rules
are tried in order and the first that matches answers::

    rules:
      - node: draft                  # context.node (a fan-out instance matches its
                                     #   target node id, or its own id "fetch[1]")
        visit: 1                     # the node's 1-based visit; a retry keeps it
        text: "First draft."
      - node: research
        round: 1                     # the first model call of this node visit...
        tool_calls: [{name: search, arguments: {q: plait}}]
      - node: research
        round: 2                     # ...and the call after the tool results came back
        text: "Found it."
      - match: "unsourced"           # a substring of context.prompt (if that is
                                     #   empty: of the last user message)
        text: "fail"
        usage: {input_tokens: 10, output_tokens: 1}
        delay_ms: 5
      - node: flaky
        error: "provider melted"     # the call raises ScriptedModelError
      - node: worker
        tool_result: "conflict"      # a substring of the last tool result (the last
                                     #   message is a tool message)
        text: "lost"
      - node: worker
        round: 1
        tool_calls:                  # a string that is one {{...}} becomes that value;
          - name: mesh_put           #   {{...}} inside a string is replaced by its text
            arguments: {key: "tasks/{{prompt.data.id}}", value: "{{instance}}", if_version: 0}
      - node: write
        text: "A long draft..."
        chunks: 200                  # streamed (Model.stream) in 200 pieces...
        chunk_delay_ms: 10           # ...each after a wait of 10 ms
      - text: "ok"                   # no node, visit, round or match: matches every call

Arguments and texts may refer to the call: ``{{prompt}}`` (the prompt, or its JSON value
when it parses, with dotted paths ``{{prompt.data.id}}``), ``{{tool_result}}`` (the last
tool result, the same way), ``{{node}}``, ``{{instance}}`` and ``{{visit}}``.

``round`` counts model calls within one node visit: 1 plus the number of assistant
messages after the last user message, so a tool loop's answer after its tool results
(the last message has role ``"tool"``) is round 2, and so on. Without ``usage`` a rule
spends one input token per word of the messages and one output token per word of its
text and tool calls.

A file is read up to :data:`MAX_SCRIPT_BYTES` and must be a regular file. A model spec
that comes over the network (the API's ``model``) names a file under
``PLAIT_SCRIPTED_DIR`` only (:func:`confine_scripted`): without it set, the server reads
no scripted model file for a caller. Errors name the file and a line, never its text.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import yaml
from pydantic import BaseModel, ConfigDict, Field, SkipValidation, ValidationError

from plait.errors import ConfigError, ScriptedModelError
from plait.models._base import (
    CallContext,
    Message,
    Model,
    ModelReply,
    OnDelta,
    ToolCall,
    Usage,
)
from plait.tools.spec import ToolSpec


class ScriptedToolCall(BaseModel):
    """A tool call a rule answers with; without ``id`` a stable one is derived."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptRule(BaseModel):
    """One rule: when it matches (all given conditions hold) and what it answers."""

    model_config = ConfigDict(extra="forbid")

    node: str | None = None
    visit: int | None = Field(default=None, ge=1)
    round: int | None = Field(default=None, ge=1)
    match: str | None = None
    tool_result: str | None = None
    text: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    usage: Usage | None = None
    delay_ms: int = Field(default=0, ge=0)
    error: str | None = None
    chunks: int = Field(default=1, ge=1)
    """How many pieces :meth:`ScriptedModel.stream` cuts the text into (at most one per
    character)."""
    chunk_delay_ms: int = Field(default=0, ge=0)
    """How long the stream waits before each piece."""

    def matches(
        self, context: CallContext, round_: int, prompt: str, tool_result: str | None = None
    ) -> bool:
        """Whether every condition this rule sets holds for the call."""
        if self.tool_result is not None and (
            tool_result is None or self.tool_result not in tool_result
        ):
            return False
        if self.node is not None and self.node not in (context.node, context.instance):
            return False
        if self.visit is not None and self.visit != context.visit:
            return False
        if self.round is not None and self.round != round_:
            return False
        return self.match is None or self.match in prompt


class ScriptedCall(BaseModel):
    """One call a scripted model received, kept for tests and inspection."""

    context: CallContext
    messages: SkipValidation[list[Message]]
    """The conversation as the model got it: typed already, so not checked again item
    by item (a long conversation's check cost more than the rest of the call)."""
    tools: list[ToolSpec] = Field(default_factory=list)
    response_format: dict[str, Any] | None = None
    tool_choice: str | None = None
    round: int = 1


KEEP_CALLS = 1_000
"""How many of its latest calls a scripted model keeps by default."""

_COUNTED_KEPT = 1_024


class ScriptedModel(Model):
    """A model that answers from rules; see the module docstring for the rule format.

    Args:
        rules: the rules, as :class:`ScriptRule` objects or plain dicts.
        source: where the rules came from, for error messages.
        keep_calls: how many of the latest calls ``calls`` keeps.

    Attributes:
        calls: the latest calls received (at least the last ``keep_calls``, at most
            twice as many), in order, including those that raised; older ones are let
            go, so a long-serving model's memory does not grow with its calls.

    Raises:
        ConfigError: a rule has an unknown field or a bad value.
    """

    def __init__(
        self,
        rules: Sequence[ScriptRule | Mapping[str, Any]],
        *,
        source: str = "<rules>",
        keep_calls: int = KEEP_CALLS,
    ) -> None:
        if isinstance(rules, str | Path):
            raise ConfigError(f"ScriptedModel takes rules; to load {rules} use from_file()")
        self.rules = [_rule(rule, index, source) for index, rule in enumerate(rules)]
        self.source = source
        self.spec = f"scripted:{source}"
        self.calls: list[ScriptedCall] = []
        self.keep_calls = max(1, keep_calls)
        self._counted: OrderedDict[tuple[str | None, str, str | None], _Counted] = OrderedDict()

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Load the rules of a JSON or YAML file.

        Raises:
            ConfigError: the file is missing, no regular file, over
                :data:`MAX_SCRIPT_BYTES`, does not parse, or holds a bad rule.
        """
        path = Path(path)
        data = _parse_script(path, _read_script(path))
        if isinstance(data, dict) and "rules" in data:
            extra = sorted(str(key) for key in data if key != "rules")
            if extra:
                raise ConfigError(f"{path}: unknown top-level field(s) {extra}; only 'rules'")
            data = data["rules"]
        if not isinstance(data, list):
            raise ConfigError(
                f"{path}: expected a list of rules or a mapping with 'rules', "
                f"found {type(data).__name__}"
            )
        return cls(data, source=str(path))

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        context: CallContext,
        response_format: dict[str, Any] | None = None,
        tool_choice: str | None = None,
    ) -> ModelReply:
        """Answer with the first matching rule; see :meth:`Model.complete`.

        Raises:
            ScriptedModelError: no rule matches, or the matching rule sets ``error``.
        """
        reply, _ = await self._answer(messages, tools, context, response_format, tool_choice)
        return reply

    async def _answer(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        context: CallContext,
        response_format: dict[str, Any] | None,
        tool_choice: str | None,
    ) -> tuple[ModelReply, ScriptRule]:
        """The reply of :meth:`complete` and the rule that gave it."""
        round_ = round_of(messages)
        if len(self.calls) >= 2 * self.keep_calls:
            del self.calls[: -self.keep_calls + 1]  # in halves: amortised O(1) per call
        self.calls.append(
            ScriptedCall(
                context=context,
                messages=list(messages),
                tools=list(tools),
                response_format=response_format,
                tool_choice=tool_choice,
                round=round_,
            )
        )
        prompt = context.prompt or _last_user_message(messages)
        result = messages[-1].content if messages and messages[-1].role == "tool" else None
        for rule in self.rules:
            if rule.matches(context, round_, prompt, result):
                break
        else:
            instance = f" (instance {context.instance!r})" if context.instance else ""
            raise ScriptedModelError(
                f"no scripted rule in {self.source} matches node {context.node!r} "
                f"visit {context.visit}{instance} round {round_}"
            )
        if rule.delay_ms:
            await anyio.sleep(rule.delay_ms / 1000)
        if rule.error is not None:
            raise ScriptedModelError(rule.error)
        calls: list[ToolCall] = []
        text = rule.text
        if rule.tool_calls or "{{" in text:
            # Most replies are plain text: the references (which parse the prompt as
            # JSON) are built only for a reply that can use them.
            refs = _References(context, prompt, result)
            who = _UNSAFE.sub("_", context.instance or context.node) or "call"
            calls = [
                ToolCall(
                    id=call.id or f"call_{who}_v{context.visit}_r{round_}_{index}",
                    name=call.name,
                    arguments=refs.fill(call.arguments),
                )
                for index, call in enumerate(rule.tool_calls)
            ]
            if "{{" in text:
                text = refs.fill(text)
        usage = rule.usage or Usage(
            input_tokens=self._input_words(context, messages),
            output_tokens=_words(text)
            + (sum(_words(f"{c.name} {json.dumps(c.arguments)}") for c in calls) if calls else 0),
        )
        reply = ModelReply(
            text=text,
            tool_calls=calls,
            usage=usage,
            model="scripted",
            stop_reason="tool_calls" if calls else "stop",
        )
        return reply, rule

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        context: CallContext,
        on_delta: OnDelta,
        response_format: dict[str, Any] | None = None,
        tool_choice: str | None = None,
    ) -> ModelReply:
        """Answer as :meth:`complete` does, the text cut into the matching rule's
        ``chunks`` pieces, each handed over after its ``chunk_delay_ms``; see
        :meth:`Model.stream`."""
        reply, rule = await self._answer(messages, tools, context, response_format, tool_choice)
        delay = rule.chunk_delay_ms / 1000
        for piece in cut(reply.text, rule.chunks):
            if delay:
                await anyio.sleep(delay)
            on_delta(piece)
        return reply

    def _input_words(self, context: CallContext, messages: Sequence[Message]) -> int:
        """The words of ``messages``, counting only what follows the conversation this
        node's last call counted (a conversation only grows by appending)."""
        key = (context.run_id, context.node, context.instance)
        last = self._counted.pop(key, None)
        start, total = 0, 0
        if last is not None and 0 < last.length <= len(messages):
            if messages[last.length - 1] is last.tail:
                start, total = last.length, last.words
        total += sum(_words(message.content) for message in messages[start:])
        if messages:
            self._counted[key] = _Counted(len(messages), messages[-1], total)
            while len(self._counted) > _COUNTED_KEPT:
                self._counted.popitem(last=False)
        return total


class _Counted(NamedTuple):
    """How many messages of a node's conversation were counted, the last of them (the
    object itself) and their words."""

    length: int
    tail: Message
    words: int


_REF = re.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*\}\}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class _References:
    """What ``{{...}}`` in a rule's arguments and text may name (see the module docstring)."""

    def __init__(self, context: CallContext, prompt: str, tool_result: str | None) -> None:
        self.roots: dict[str, Any] = {
            "prompt": _json_or_text(prompt),
            "tool_result": _json_or_text(tool_result) if tool_result is not None else None,
            "node": context.node,
            "instance": context.instance or context.node,
            "visit": context.visit,
        }

    def value(self, path: str) -> Any:
        head, *rest = path.split(".")
        found = self.roots[head]
        for part in rest:
            if isinstance(found, dict) and part in found:
                found = found[part]
            elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
                found = found[int(part)]
            else:
                raise ScriptedModelError(f"a scripted rule's {{{{{path}}}}} names nothing here")
        return found

    def fill(self, template: Any) -> Any:
        if isinstance(template, dict):
            return {k: self.fill(v) for k, v in template.items()}
        if isinstance(template, list):
            return [self.fill(v) for v in template]
        if not isinstance(template, str) or "{{" not in template:
            return template
        # Only the names above are references: other {{...}} (a reply quoting a graph's
        # own template syntax) stay as they are.
        whole = _REF.fullmatch(template.strip())
        if whole and whole.group(1).split(".")[0] in self.roots:
            return self.value(whole.group(1))
        return _REF.sub(
            lambda m: (
                _as_text(self.value(m.group(1)))
                if m.group(1).split(".")[0] in self.roots
                else m.group(0)
            ),
            template,
        )


_JSON_STARTS = frozenset('{["-0123456789tfnNI')
"""What a JSON text's first character after whitespace can be (``NaN`` and
``Infinity`` included, as :func:`json.loads` reads them)."""


def _json_or_text(text: str) -> Any:
    head = text.lstrip()[:1]
    if head not in _JSON_STARTS:
        return text  # plain text, without the cost of a raised JSONDecodeError
    try:
        return json.loads(text)
    except ValueError:
        return text


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def cut(text: str, pieces: int) -> list[str]:
    """``text`` in ``pieces`` pieces of near-equal length (fewer for a shorter text; none
    for an empty one), which joined are ``text``."""
    pieces = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), pieces)
    out, start = [], 0
    for index in range(pieces if text else 0):
        end = start + size + (index < extra)
        out.append(text[start:end])
        start = end
    return out


def round_of(messages: Sequence[Message]) -> int:
    """1 plus the number of assistant messages after the last user message."""
    count = 0
    for message in reversed(messages):
        if message.role == "user":
            break
        count += message.role == "assistant"
    return count + 1


def _last_user_message(messages: Sequence[Message]) -> str:
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


@functools.lru_cache(maxsize=4096)
def _words(text: str) -> int:
    # Cached: a conversation's earlier messages are counted again on every call.
    return len(text.split())


MAX_SCRIPT_BYTES = 1024 * 1024
"""The largest scripted model file read: 1 MiB."""

SCRIPTED_DIR_ENV = "PLAIT_SCRIPTED_DIR"
"""The folder a server reads the scripted model files its callers name from."""


def _read_script(path: Path) -> str:
    """The text of a rule file: a regular file of at most :data:`MAX_SCRIPT_BYTES`."""
    try:
        with path.open("rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ConfigError(f"the scripted model file {path} is not a regular file")
            data = f.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"cannot read the scripted model file {path}: {reason}") from None
    if len(data) > MAX_SCRIPT_BYTES:
        raise ConfigError(
            f"the scripted model file {path} is over the limit of {MAX_SCRIPT_BYTES} bytes"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: line {line}: not UTF-8: save it as UTF-8") from None


def _parse_script(path: Path, text: str) -> Any:
    """The data of a rule file; an error names the line, never echoes the text."""
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise ConfigError(f"{path}: not valid JSON or YAML ({where}: {exc.msg})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or "does not parse"
        raise ConfigError(f"{path}: not valid JSON or YAML ({where}{problem})") from None
    except (ValueError, RecursionError):  # a number over Python's digit limit, deep nesting
        raise ConfigError(f"{path}: not a rule file (too deep, or a number too long)") from None


def scripted_root() -> Path | None:
    """The folder of :data:`SCRIPTED_DIR_ENV`, resolved; None when it is unset."""
    value = os.environ.get(SCRIPTED_DIR_ENV)
    return Path(value).expanduser().resolve() if value else None


def confine_scripted(spec: str | None, root: Path | None) -> str | None:
    """A model spec from a caller over the network, with any ``scripted:`` file held to
    the folder ``root``: a relative path is read from there, and a path that resolves
    (symbolic links followed) outside it is refused.

    Returns:
        ``spec`` itself for another model, else ``scripted:`` and the file's resolved path.

    Raises:
        ConfigError: a scripted file is named and ``root`` is None, or the file lies
            outside it.
    """
    if spec is None or not spec.startswith("scripted:"):
        return spec
    raw = spec.split(":", 1)[1]
    if root is None:
        raise ConfigError(
            f"scripted models are off for API callers: the server reads scripted model "
            f"files only from the folder {SCRIPTED_DIR_ENV} names, and it is unset"
        )
    path = (root / raw).resolve()
    if not raw or not path.is_relative_to(root):
        raise ConfigError(
            f"scripted model file {raw!r} is outside the server's {SCRIPTED_DIR_ENV}: "
            "name a file in that folder"
        )
    return f"scripted:{path}"


def _rule(rule: ScriptRule | Mapping[str, Any], index: int, source: str) -> ScriptRule:
    if isinstance(rule, ScriptRule):
        return rule
    if not isinstance(rule, Mapping):
        raise ConfigError(
            f"{source}: rule {index}: expected a mapping, found {type(rule).__name__}"
        )
    try:
        return ScriptRule.model_validate(dict(rule))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(rule)'}: {error['msg']}"
            for error in exc.errors()
        )
        raise ConfigError(f"{source}: rule {index}: {problems}") from exc


def pin_model_spec(spec: str | None, cwd: Path | None = None) -> str | None:
    """``spec`` with a relative ``scripted:`` path made absolute (from ``cwd``, default
    the working directory), so a run names the same file on any worker."""
    if spec is None or not spec.startswith("scripted:"):
        return spec
    raw = spec.split(":", 1)[1]
    path = Path(raw).expanduser()
    if not raw or path.is_absolute():
        return spec
    return f"scripted:{(cwd or Path.cwd()) / path}"


__all__ = [
    "KEEP_CALLS",
    "MAX_SCRIPT_BYTES",
    "SCRIPTED_DIR_ENV",
    "ScriptRule",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedToolCall",
    "confine_scripted",
    "cut",
    "pin_model_spec",
    "round_of",
    "scripted_root",
]
