"""Node templates: ``{{key}}`` substitution, and nothing more.

The forms, all with optional whitespace inside the braces:

- ``{{input}}``: the run's input.
- ``{{id}}``: the latest output of node ``id``; a missing one raises
  :class:`~plait.errors.TemplateError`.
- ``{{id?}}``: the same, falling back to :data:`PLACEHOLDER`.
- ``{{id|default:"text"}}`` (or single quotes): falling back to the literal.
- ``{{id.field.sub}}``, ``{{id[2]}}``, ``{{researcher.urls[0]}}``: a path into a
  structured output; a missing field or index counts as a missing output.
- ``{{item}}`` (and ``{{item.x}}``): the list element of a map instance.
- ``{{fetcher[0]}}``: the output of fan-out instance 0.

Anything else in braces (``{"a": 1}``, ``{{ not a ref }}``, ``{{}}``) is plain text.
Nothing is evaluated. Strings render as they are; other values as compact JSON.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from plait.errors import TemplateError

PLACEHOLDER: Final = "(no output yet)"
"""What ``{{id?}}`` renders while ``id`` has no output."""

MAX_TEMPLATE_CHARS: Final = 100_000
"""The longest template a graph may hold; longer text belongs in the run's input."""


class _Missing(enum.Enum):
    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing.MISSING
"""The ``item`` of a context outside any map instance (None is a valid item)."""

PathSegment = str | int

_NAME = r"[A-Za-z_][A-Za-z0-9_-]*"
_FIELD = r"[A-Za-z0-9_-]+"
_SEGMENT = re.compile(rf"\.?({_FIELD})|\[(\d+)\]")
_PATH = re.compile(rf"(?:{_FIELD}|\[\d+\])(?:\.{_FIELD}|\[\d+\])*")
_TEMPLATE = re.compile(
    r"\{\{\s*"
    rf"(?P<name>{_NAME})(?P<path>(?:\.{_FIELD}|\[\d+\])*)"
    r"(?:(?P<opt>\?)|\s*\|\s*default\s*:\s*(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'))?"
    r"\s*\}\}"
)
_OPENED = re.compile(rf"\{{\{{\s*{_NAME}[^{{}}\s]*")


@dataclass(frozen=True)
class TemplateRef:
    """One ``{{...}}`` reference of a template.

    Attributes:
        name: ``"input"``, ``"item"`` or a node id (``"fetcher"`` for ``{{fetcher[0]}}``).
        path: fields and indices read into the value (``("urls", 0)``).
        optional: written with ``?``: falls back to :data:`PLACEHOLDER`.
        default: the literal of ``|default:"..."``, or None.
        raw: the reference as written, braces included.
    """

    name: str
    path: tuple[PathSegment, ...]
    optional: bool
    default: str | None
    raw: str

    @property
    def key(self) -> str:
        """The name and path, as in ``researcher.urls[0]``."""
        return self.name + format_path(self.path)


@dataclass(frozen=True)
class TemplateContext:
    """What templates read.

    Attributes:
        input: the run's input.
        outputs: node id -> its latest output, including instance ids (``"fetcher[0]"``)
            and the aggregated list of instance outputs under the target's id.
        item: the list element of the map instance being rendered, else MISSING.
    """

    input: Any
    outputs: Mapping[str, Any]
    item: Any = MISSING


def format_path(path: Sequence[PathSegment]) -> str:
    """Render a path as written after a name: ``("urls", 0)`` -> ``.urls[0]``."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


@functools.lru_cache(maxsize=1024)
def parse_path(path: str) -> tuple[PathSegment, ...]:
    """Parse a dotted path (``"urls"``, ``"a.b[2]"``, ``""``) into its segments.

    Raises:
        TemplateError: the path is malformed.
    """
    if path == "":
        return ()
    if not _PATH.fullmatch(path):
        raise TemplateError("", path, "malformed path (expected fields and [n], like a.b[2])")
    return tuple(
        int(m.group(2)) if m.group(2) is not None else m.group(1) for m in _SEGMENT.finditer(path)
    )


@functools.lru_cache(maxsize=4096)
def _compile(template: str) -> tuple[str | TemplateRef, ...]:
    segments: list[str | TemplateRef] = []
    pos = 0
    for m in _TEMPLATE.finditer(template):
        if m.start() > pos:
            segments.append(template[pos : m.start()])
        default = m.group("dq") if m.group("dq") is not None else m.group("sq")
        segments.append(
            TemplateRef(
                name=m.group("name"),
                path=parse_path(m.group("path").removeprefix(".")),
                optional=m.group("opt") is not None,
                default=default,
                raw=m.group(0),
            )
        )
        pos = m.end()
    if pos < len(template):
        segments.append(template[pos:])
    return tuple(segments)


def references(template: str) -> list[TemplateRef]:
    """Every reference in ``template``, in order."""
    return [s for s in _compile(template) if isinstance(s, TemplateRef)]


def _braced(text: str) -> list[str]:
    """Every ``{{...}}`` of ``text``: from a ``{{`` to the first ``}}`` after it.

    One pass with ``str.find``: a regex trying each ``{{`` against the rest of the text
    is quadratic in a text of many ``{{`` and no ``}}``. Once no ``}}`` follows a ``{{``,
    none follows any later one either, so the scan stops there.
    """
    out: list[str] = []
    pos = 0
    while (start := text.find("{{", pos)) >= 0:
        end = text.find("}}", start + 2)
        if end < 0:
            break
        out.append(text[start : end + 2])
        pos = end + 2
    return out


def loose_braces(template: str) -> list[str]:
    """Every ``{{...}}`` in ``template`` that is not a reference and stays plain text."""
    return [found for s in _compile(template) if isinstance(s, str) for found in _braced(s)]


def unclosed_references(template: str) -> list[str]:
    """Every ``{{name`` in ``template`` left unclosed: ``{{researcher}``, or no ``}}`` after it."""
    out = []
    for s in _compile(template):
        if not isinstance(s, str):
            continue
        last_close = s.rfind("}}")  # once, not a search of the rest per opening
        for m in _OPENED.finditer(s):
            after = s[m.end() : m.end() + 2]
            if last_close < m.end() or (after.startswith("}") and after != "}}"):
                out.append(m.group(0) + "}" if after.startswith("}") else m.group(0))
    return out


def _step(value: Any, segment: PathSegment) -> tuple[bool, Any]:
    if isinstance(segment, int):
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            if segment < len(value):
                return True, value[segment]
        return False, None
    if isinstance(value, Mapping) and segment in value:
        return True, value[segment]
    return False, None


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    if value is None:
        return "null"
    names = {"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean"}
    return names.get(type(value).__name__, f"a {type(value).__name__}")


def _walk(value: Any, path: Sequence[PathSegment]) -> tuple[bool, Any, str]:
    if not path:
        return True, value, ""  # the common case: a whole output
    for depth, segment in enumerate(path):
        ok, found = _step(value, segment)
        if not ok:
            what = f"index {segment}" if isinstance(segment, int) else f"field {segment!r}"
            where = f" under {format_path(path[:depth]).removeprefix('.')!r}" if depth else ""
            return False, None, f"no {what}{where} (found {_kind(value)})"
        value = found
    return True, value, ""


def resolve_path(
    value: Any, path: str | Sequence[PathSegment], *, node: str = "", key: str = ""
) -> Any:
    """Read the value at ``path`` inside ``value`` (``"urls"``, ``"a.b[2]"``, ``""``).

    Args:
        value: a structured value (dicts and lists).
        path: a dotted path, or its parsed segments.
        node: the node asking, for the error.
        key: how the caller names the value, for the error (default: the path).

    Raises:
        TemplateError: the path is malformed, or a field or index is missing.
    """
    segments = parse_path(path) if isinstance(path, str) else tuple(path)
    ok, found, reason = _walk(value, segments)
    if not ok:
        raise TemplateError(node, key or format_path(segments).removeprefix("."), reason)
    return found


def _find(ref: TemplateRef, ctx: TemplateContext) -> tuple[bool, Any, str]:
    if ref.name == "input":
        return _walk(ctx.input, ref.path)
    if ref.name == "item":
        if ctx.item is MISSING:
            return False, None, "{{item}} is only set inside a map fan-out instance"
        return _walk(ctx.item, ref.path)
    outputs = ctx.outputs
    found: tuple[bool, Any, str]
    if ref.name in outputs:
        found = _walk(outputs[ref.name], ref.path)
        if found[0]:
            return found
    else:  # the reason is worded only when it is needed
        found = (False, None, f"node {ref.name!r} has no output yet")
    if ref.path and isinstance(ref.path[0], int):
        instance = f"{ref.name}[{ref.path[0]}]"
        if instance in outputs:
            return _walk(outputs[instance], ref.path[1:])
    return found


def _lookup(ref: TemplateRef, ctx: TemplateContext, node: str) -> Any:
    ok, value, reason = _find(ref, ctx)
    if ok:
        return value
    if ref.default is not None:
        return ref.default
    if ref.optional:
        return PLACEHOLDER
    raise TemplateError(node, ref.key, reason)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    raise TypeError(type(value).__name__)


def _to_text(value: Any, node: str, ref: TemplateRef) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_json_default)
    except (TypeError, ValueError) as exc:
        raise TemplateError(node, ref.key, f"value cannot be rendered as JSON: {exc}") from exc


def render(template: str, ctx: TemplateContext, *, node: str = "") -> str:
    """Render ``template`` against ``ctx``.

    Args:
        template: the text with ``{{...}}`` references.
        ctx: the input, the outputs and the map item.
        node: the node being rendered, named in errors.

    Raises:
        TemplateError: a reference without ``?`` or a default has no value.
    """
    return "".join(
        [
            s if isinstance(s, str) else _to_text(_lookup(s, ctx, node), node, s)
            for s in _compile(template)
        ]
    )


def render_value(value: Any, ctx: TemplateContext, *, node: str = "") -> Any:
    """Render every string inside nested dicts and lists.

    A string that is exactly one reference (``"{{researcher.urls}}"``) yields the value
    itself, keeping its type; other strings render as :func:`render` does.

    Raises:
        TemplateError: a reference without ``?`` or a default has no value.
    """
    if isinstance(value, str):
        segments = _compile(value)
        if len(segments) == 1 and isinstance(segments[0], TemplateRef):
            return _lookup(segments[0], ctx, node)
        return render(value, ctx, node=node)
    if isinstance(value, Mapping):
        return {k: render_value(v, ctx, node=node) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render_value(v, ctx, node=node) for v in value]
    return value


__all__ = [
    "MAX_TEMPLATE_CHARS",
    "MISSING",
    "PLACEHOLDER",
    "PathSegment",
    "TemplateContext",
    "TemplateRef",
    "format_path",
    "loose_braces",
    "parse_path",
    "references",
    "render",
    "render_value",
    "resolve_path",
    "unclosed_references",
]
