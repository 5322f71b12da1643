"""Read graph files (JSON or YAML) and turn them into validated specs."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from plait.errors import GraphValidationError
from plait.graphs.spec import GraphSpec
from plait.graphs.validate import validate_graph

_YAML_SUFFIXES = (".yaml", ".yml")


def _json_error(exc: json.JSONDecodeError) -> str:
    return f"line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: invalid YAML: {problem}"
    return f"invalid YAML: {problem}"


def _parse(text: str, suffix: str) -> Any:
    """Parse by extension; without a known one, JSON first, then YAML."""
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(_json_error(exc)) from exc
    if suffix in _YAML_SUFFIXES:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(_yaml_error(exc)) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as json_exc:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            # Report the JSON error: a file that is neither is most often broken JSON.
            raise ValueError(_json_error(json_exc)) from json_exc


def load_graph_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a graph file as plain data, without validating it.

    ``.json`` files are JSON, ``.yaml``/``.yml`` files YAML; any other name is tried as
    JSON, then as YAML.

    Raises:
        GraphValidationError: the file cannot be read, does not parse (the problem names
            the line), or does not hold an object.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise GraphValidationError([f"(file): cannot read: {reason}"], source) from exc
    try:
        data = _parse(text, Path(path).suffix.lower())
    except ValueError as exc:
        raise GraphValidationError([str(exc)], source) from exc
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


__all__ = ["load_graph", "load_graph_file"]
