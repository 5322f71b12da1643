"""Read graph files (JSON or YAML) and turn them into validated specs."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from plait.errors import GraphValidationError
from plait.graphs.problems import Problem
from plait.graphs.spec import GraphSpec
from plait.graphs.validate import validate_graph

_YAML_SUFFIXES = (".yaml", ".yml")

MAX_FILE_BYTES = 1024 * 1024
"""The largest graph file read: 1 MiB."""

MAX_YAML_NODES = 100_000
"""The most YAML nodes a file may stand for once its aliases are expanded."""

_MERGE = "tag:yaml.org,2002:merge"

_TOO_LONG = (
    f"a number has over {sys.get_int_max_str_digits()} digits, more than Python reads: "
    "write it shorter, or as a string"
)


def _where(mark: yaml.Mark | None) -> str:
    return "" if mark is None else f"line {mark.line + 1}, column {mark.column + 1}: "


def _problem(message: str, mark: yaml.Mark | None, path: str = "(file)") -> Problem:
    if mark is None:
        return Problem(path, message)
    return Problem(path, message, line=mark.line + 1, column=mark.column + 1)


class _Unparsable(GraphValidationError):
    """The text does not parse at all (as opposed to parsing into something refused)."""


def _invalid(exc: BaseException, what: str) -> GraphValidationError:
    if isinstance(exc, json.JSONDecodeError):
        where = f"line {exc.lineno}, column {exc.colno}: "
        message = f"{where}invalid {what}: {exc.msg}"
        return _Unparsable([Problem("(file)", message, line=exc.lineno, column=exc.colno)])
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return _Unparsable([_problem(f"{_where(mark)}invalid {what}: {problem}", mark)])


def _refuse(
    message: str, mark: yaml.Mark | None = None, path: str = "(file)"
) -> GraphValidationError:
    return GraphValidationError([_problem(message, mark, path)])


def _children(node: yaml.Node) -> list[tuple[str | int, yaml.Node]]:
    if isinstance(node, yaml.SequenceNode):
        return list(enumerate(node.value))
    if isinstance(node, yaml.MappingNode):
        return [(k.value if isinstance(k, yaml.ScalarNode) else "?", v) for k, v in node.value]
    return []


def _check_nodes(root: yaml.Node) -> None:
    """Refuse a self-referring anchor, aliases that expand past the limit, duplicate keys.

    One walk over the distinct nodes: the expanded size of each is memoized, so an
    alias bomb is measured in the time its text takes to read, never expanded.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, str, bool]] = [(root, "(root)", False)]
    while stack:
        node, path, done = stack.pop()
        kids = _children(node)
        if done:
            on_path.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for _, child in kids)
            if sizes[id(node)] > MAX_YAML_NODES:
                raise _refuse(
                    f"{_where(node.start_mark)}aliases expand to over {MAX_YAML_NODES} nodes "
                    "(an alias bomb?): write the values out, or use fewer aliases",
                    node.start_mark,
                    path,
                )
            continue
        if id(node) in sizes:
            continue
        on_path.add(id(node))
        stack.append((node, path, True))
        seen: dict[Any, int] = {}
        for part, child in kids:
            sub = f"{path}[{part}]" if isinstance(part, int) else f"{path}.{part}"
            sub = sub.removeprefix("(root).").removeprefix("(root)")
            if id(child) in on_path:
                raise _refuse(
                    f"{_where(child.start_mark)}an anchor refers to itself: "
                    "a graph is a tree, so write the value out",
                    child.start_mark,
                    sub,
                )
            if id(child) not in sizes:
                stack.append((child, sub, False))
        if isinstance(node, yaml.MappingNode):
            for key_node, _ in node.value:
                if key_node.tag == _MERGE or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise _refuse(
                        f"{_where(key_node.start_mark)}duplicate key {json.dumps(key_node.value)}"
                        f" (first on line {seen[key]}): keep one",
                        key_node.start_mark,
                        path,
                    )
                seen[key] = key_node.start_mark.line + 1


def _compose(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise _refuse("nested too deep to read (flatten the file)") from None
    except yaml.YAMLError as exc:
        raise _invalid(exc, "YAML") from None


def _yaml(text: str) -> Any:
    root = _compose(text)
    if root is None:
        return None
    _check_nodes(root)
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        raise _invalid(exc, "YAML") from None
    except ValueError:  # an int over the digit limit
        raise _refuse(_TOO_LONG) from None
    finally:
        loader.dispose()


class _DuplicateKey(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _json(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        raise _invalid(exc, "JSON") from None
    except RecursionError:
        raise _refuse("nested too deep to read (flatten the file)") from None
    except _DuplicateKey as exc:
        # JSON is YAML: the YAML walk finds the key's place and path.
        root = _compose_quietly(text)
        if root is not None:
            _check_nodes(root)
        raise _refuse(f"duplicate key {json.dumps(str(exc))}: keep one") from None
    except ValueError:  # an int over the digit limit
        raise _refuse(_TOO_LONG) from None


def _compose_quietly(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return None


def _parse(text: str, suffix: str) -> Any:
    """Parse by extension; without a known one, JSON first, then YAML."""
    if suffix == ".json":
        return _json(text)
    if suffix in _YAML_SUFFIXES:
        return _yaml(text)
    try:
        return _json(text)
    except _Unparsable as json_exc:
        try:
            return _yaml(text)
        except _Unparsable:
            # Report the JSON error: a file that is neither is most often broken JSON.
            raise json_exc from None


def _read(path: Path) -> str:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise _refuse(f"cannot read: {exc.strerror or exc}") from exc
    if len(data) > MAX_FILE_BYTES:
        raise _refuse(f"the file is over the limit of {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise GraphValidationError(
            [
                Problem(
                    "(file)",
                    f"line {line}, column {column}: not UTF-8 (byte "
                    f"0x{data[exc.start]:02x}): save the file as UTF-8",
                    line=line,
                    column=column,
                )
            ]
        ) from None


def load_graph_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a graph file as plain data, without validating it.

    ``.json`` files are JSON, ``.yaml``/``.yml`` files YAML; any other name is tried as
    JSON, then as YAML. Hostile files are refused with a problem, not read: over
    :data:`MAX_FILE_BYTES`, not UTF-8, nested too deep, a duplicate key, or YAML
    aliases that refer to themselves or expand past :data:`MAX_YAML_NODES`.

    Raises:
        GraphValidationError: the file cannot be read, does not parse (the problem names
            the line), or does not hold an object.
    """
    source = str(path)
    try:
        data = _parse(_read(Path(path)), Path(path).suffix.lower())
    except GraphValidationError as exc:
        raise GraphValidationError(exc.problems, source) from None
    if not isinstance(data, dict):
        found = "nothing" if data is None else type(data).__name__
        raise GraphValidationError([f"(root): a graph is an object, found {found}"], source)
    return data


def load_graph(
    path_or_mapping: str | os.PathLike[str] | Mapping[str, Any], **validate_kwargs: Any
) -> GraphSpec:
    """Load and validate a graph from a file or from plain data.

    Args:
        path_or_mapping: a graph file's path, or the graph as a mapping.
        **validate_kwargs: passed to :func:`plait.graphs.validate.validate_graph`
            (``agents``, ``tool_is_known``, ``max_steps_cap``).

    Raises:
        GraphValidationError: listing every problem, with the file as its source.
    """
    if isinstance(path_or_mapping, Mapping):
        data, source = path_or_mapping, None
    else:
        data, source = load_graph_file(path_or_mapping), str(path_or_mapping)
    return validate_graph(data, **validate_kwargs).raise_for_problems(source)


__all__ = ["MAX_FILE_BYTES", "MAX_YAML_NODES", "load_graph", "load_graph_file"]
