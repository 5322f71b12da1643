"""built(): a model from typed values, as model_construct makes it, without validation."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from plait.graphs.state import Attempt, NodeOutput, RunUsage
from plait.models import CallContext, Message, ModelReply, Usage
from plait.models.built import built
from plait.runs.progress import Progress, StartedVisit


class Holder(BaseModel):
    name: str
    tags: list[str] = Field(default_factory=list)
    plain: list[int] = [1, 2]  # a mutable default: copied per instance
    note: str | None = None


@pytest.mark.parametrize(
    ("cls", "values"),
    [
        (Message, {"role": "user", "content": "hi"}),
        (Usage, {"input_tokens": 3, "output_tokens": 1}),
        (CallContext, {"node": "draft", "visit": 2, "run_id": "r", "prompt": "p"}),
        (
            ModelReply,
            {"text": "t", "usage": Usage(input_tokens=1), "model": "m", "stop_reason": "stop"},
        ),
        (Attempt, {"node": "a", "visit": 1, "nonce": "n", "started_at": 1.5, "begun": False}),
        (RunUsage, {"steps": 2, "dollars": 0.5}),
        (NodeOutput, {"value": {"x": [1]}, "visit": 3, "seq": 4, "at": 2.0}),
        (Progress, {"status": "running", "audit_seq": 3, "node": "n"}),
        (StartedVisit, {"node": "n", "visit": 1, "at": 1.0}),
        (Holder, {"name": "h"}),
    ],
)
def test_built_is_what_validation_makes(cls: type[BaseModel], values: dict[str, object]) -> None:
    made = built(cls, **values)
    valid = cls(**values)
    assert made == valid
    assert made.model_fields_set == valid.model_fields_set
    assert made.model_dump() == valid.model_dump()
    assert made.model_dump(exclude_none=True) == valid.model_dump(exclude_none=True)
    assert made.model_dump_json() == valid.model_dump_json()


def test_defaults_are_not_shared_between_instances() -> None:
    first, second = built(Holder, name="a"), built(Holder, name="b")
    first.tags.append("x")
    first.plain.append(3)
    assert second.tags == [] and second.plain == [1, 2]
    assert Holder.model_fields["plain"].default == [1, 2]


def test_unknown_or_missing_fields_are_refused() -> None:
    with pytest.raises(TypeError, match=r"Holder has no field\(s\) \['nmae'\]"):
        built(Holder, nmae="typo")
    with pytest.raises(TypeError, match=r"Holder needs field\(s\) \['name'\]"):
        built(Holder)


def test_models_keeping_more_than_fields_are_refused() -> None:
    class Private(BaseModel):
        _secret: int = PrivateAttr(default=0)

    class Extra(BaseModel):
        model_config = ConfigDict(extra="allow")

    for cls in (Private, Extra):
        with pytest.raises(TypeError, match="validate it"):
            built(cls)
