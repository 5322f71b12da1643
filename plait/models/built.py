"""Building pydantic models on the hot path from values that are typed already.

A model's ``__init__`` validates every field, and ``model_construct`` (which skips
validation) inspects each default factory's signature on every call: either costs more
than the few fields a node visit, a model reply or an engine record carries. What the
runtime builds from its own typed values (a reply's usage, a visit's messages, a
claim's attempt) is built here instead: the fields given, the defaults filled in from a
table worked out once per class. Input from outside (a request, a stored record, a
provider's reply) is still validated.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

_M = TypeVar("_M", bound=BaseModel)
_set = object.__setattr__

_MISSING: Any = object()

_Plan = tuple[
    frozenset[str], dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...], tuple[str, ...]
]
_plans: dict[type[BaseModel], _Plan] = {}


def built(cls: type[_M], /, **values: Any) -> _M:
    """A ``cls`` holding ``values`` (not validated), its other fields at their defaults.

    As ``cls.model_construct(**values)`` for a model with no extra fields and no
    private attributes, without its per-call cost.

    Raises:
        TypeError: ``values`` names a field ``cls`` does not have, or leaves out one
            it requires.
    """
    plan = _plans.get(cls) or _plan(cls)
    names, template, factories, required = plan
    if not names.issuperset(values):
        unknown = sorted(set(values) - names)
        raise TypeError(f"{cls.__name__} has no field(s) {unknown}")
    # The template holds every field in its declared order, which a dump follows.
    data = template.copy()
    data.update(values)
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
    for name in required:
        if data[name] is _MISSING:
            missing = sorted(n for n in required if data[n] is _MISSING)
            raise TypeError(f"{cls.__name__} needs field(s) {missing}")
    new = cls.__new__(cls)
    _set(new, "__dict__", data)
    _set(new, "__pydantic_fields_set__", set(values))
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


def _plan(cls: type[BaseModel]) -> _Plan:
    """``cls``'s field names, plain defaults and default factories (worked out once)."""
    if cls.__private_attributes__ or cls.model_config.get("extra") == "allow":
        raise TypeError(f"{cls.__name__} keeps private or extra attributes: validate it")
    template: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    required: list[str] = []
    for name, info in cls.model_fields.items():
        template[name] = None
        if info.default_factory is not None:
            if getattr(info, "default_factory_takes_data", False):
                raise TypeError(f"{cls.__name__}.{name}'s default depends on data: validate it")
            factories.append((name, info.default_factory))  # type: ignore[arg-type]
        elif isinstance(info.default, list | dict | set):
            # A mutable default is copied per instance, as validation copies it.
            factories.append((name, functools.partial(copy.deepcopy, info.default)))
        elif info.default is PydanticUndefined:
            template[name] = _MISSING
            required.append(name)
        else:
            template[name] = info.default
    plan = (frozenset(template), template, tuple(factories), tuple(required))
    _plans[cls] = plan
    return plan


__all__ = ["built"]
