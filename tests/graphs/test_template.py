from __future__ import annotations

import re
from typing import Any

import pytest

from plait.errors import TemplateError
from plait.graphs.template import (
    MISSING,
    PLACEHOLDER,
    TemplateContext,
    TemplateRef,
    loose_braces,
    parse_path,
    references,
    render,
    render_value,
    resolve_path,
)

OUTPUTS: dict[str, Any] = {
    "draft": "A draft.",
    "researcher": {"urls": ["https://a", "https://b"], "meta": {"count": 2, "ok": True}},
    "fetcher": ["page a", "page b"],
    "fetcher[0]": "page a",
    "fetcher[1]": "page b",
    "score": 0.5,
    "nothing": None,
    "texte": "été",
}
CTX = TemplateContext(input="the Q3 numbers", outputs=OUTPUTS)


def r(template: str, ctx: TemplateContext = CTX) -> str:
    return render(template, ctx, node="me")


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Write about {{input}}.", "Write about the Q3 numbers."),
        ("{{draft}}", "A draft."),
        ("{{ draft }}", "A draft."),
        ("[{{verify?}}]", f"[{PLACEHOLDER}]"),
        ("[{{draft?}}]", "[A draft.]"),
        ('{{verify|default:"no critique"}}', "no critique"),
        ("{{verify|default:'single'}}", "single"),
        ('{{ verify | default : "spaced" }}', "spaced"),
        ('{{draft|default:"unused"}}', "A draft."),
        ('{{verify|default:""}}', ""),
        ("{{researcher.urls[0]}}", "https://a"),
        ("{{researcher.meta.count}}", "2"),
        ("{{researcher.meta.ok}}", "true"),
        ("{{researcher.urls}}", '["https://a","https://b"]'),
        ("{{researcher.meta}}", '{"count":2,"ok":true}'),
        ("{{fetcher[1]}}", "page b"),
        ("{{fetcher}}", '["page a","page b"]'),
        ("{{score}}", "0.5"),
        ("{{nothing}}", "null"),
        ("{{texte}}", "été"),
        ("{{researcher.missing?}}", PLACEHOLDER),
        ('{{researcher.urls[9]|default:"none"}}', "none"),
        ("{{draft}}{{draft}}", "A draft.A draft."),
    ],
)
def test_forms(template: str, expected: str) -> None:
    assert r(template) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        "{{ not a ref }}",
        "{{}}",
        "{ {input} }",
        "{{draft.}}",
        "{{draft?|default:'x'}}",
        "{{1abc}}",
        "}} and {{",
        "{{input",
    ],
)
def test_braces_that_are_not_templates_pass_through(text: str) -> None:
    assert r(text) == text
    assert references(text) == []


def test_triple_braces_keep_the_outer_ones() -> None:
    assert r("{{{input}}}") == "{the Q3 numbers}"


def test_item_inside_a_map_instance() -> None:
    ctx = TemplateContext(input=None, outputs=OUTPUTS, item={"url": "https://a", "n": [1, 2]})
    assert r("Fetch {{item.url}}", ctx) == "Fetch https://a"
    assert r("{{item.n[1]}} {{item}}", ctx) == '2 {"url":"https://a","n":[1,2]}'
    assert r("{{item}}", TemplateContext(input=None, outputs={}, item=None)) == "null"
    assert r("{{item?}}") == PLACEHOLDER
    assert CTX.item is MISSING


def test_instance_ids_read_instance_outputs_without_the_aggregate() -> None:
    ctx = TemplateContext(input=None, outputs={"fetcher[1]": {"title": "B"}})
    assert r("{{fetcher[1].title}}", ctx) == "B"
    with pytest.raises(TemplateError):
        r("{{fetcher[0]}}", ctx)


@pytest.mark.parametrize(
    ("template", "key", "reason"),
    [
        ("Critique: {{verify}}", "verify", "no output yet"),
        ("{{researcher.nope}}", "researcher.nope", "no field 'nope'"),
        ("{{researcher.urls[5]}}", "researcher.urls[5]", "no index 5 under 'urls'"),
        ("{{draft.x}}", "draft.x", "found a string"),
        ("{{item}}", "item", "map fan-out instance"),
        ("{{input.topic}}", "input.topic", "no field 'topic'"),
    ],
)
def test_missing_values_fail_naming_node_and_key(template: str, key: str, reason: str) -> None:
    with pytest.raises(TemplateError) as info:
        r(template)
    assert info.value.node == "me"
    assert info.value.key == key
    assert reason in info.value.reason
    assert f"{{{{{key}}}}}" in str(info.value)


def test_render_value_keeps_types_of_whole_references() -> None:
    value = {
        "urls": "{{researcher.urls}}",
        "count": "{{ researcher.meta.count }}",
        "text": "n={{researcher.meta.count}}",
        "nested": [{"q": "{{input}}"}, 3, None, True],
        "fallback": "{{verify?}}",
        "plain": "no refs",
    }
    assert render_value(value, CTX) == {
        "urls": ["https://a", "https://b"],
        "count": 2,
        "text": "n=2",
        "nested": [{"q": "the Q3 numbers"}, 3, None, True],
        "fallback": PLACEHOLDER,
        "plain": "no refs",
    }
    with pytest.raises(TemplateError) as info:
        render_value({"a": ["{{ghost}}"]}, CTX, node="tool1")
    assert (info.value.node, info.value.key) == ("tool1", "ghost")


def test_references() -> None:
    refs = references('{{input}} {{ researcher.urls[0] }} {{v?}} {{w|default:"d"}} {{fetcher[0]}}')
    assert refs == [
        TemplateRef("input", (), False, None, "{{input}}"),
        TemplateRef("researcher", ("urls", 0), False, None, "{{ researcher.urls[0] }}"),
        TemplateRef("v", (), True, None, "{{v?}}"),
        TemplateRef("w", (), False, "d", '{{w|default:"d"}}'),
        TemplateRef("fetcher", (0,), False, None, "{{fetcher[0]}}"),
    ]
    assert refs[1].key == "researcher.urls[0]"


def test_loose_braces() -> None:
    assert loose_braces("{{draft}} {{ not a ref }} {{}} {x}") == ["{{ not a ref }}", "{{}}"]


def test_resolve_path() -> None:
    value = {"a": {"b": [10, 11, {"c": "deep"}]}, "urls": ["u"]}
    assert resolve_path(value, "urls") == ["u"]
    assert resolve_path(value, "a.b[2]") == {"c": "deep"}
    assert resolve_path(value, "a.b[2].c") == "deep"
    assert resolve_path(value, ("a", "b", 0)) == 10
    assert resolve_path(value, "") is value
    assert resolve_path([[1, 2]], "[0][1]") == 2
    with pytest.raises(TemplateError, match=re.escape("no index 7 under 'a.b'")) as info:
        resolve_path(value, "a.b[7]", node="fanout", key="researcher.a.b[7]")
    assert (info.value.node, info.value.key) == ("fanout", "researcher.a.b[7]")
    with pytest.raises(TemplateError, match="malformed path"):
        resolve_path(value, "a..b")
    assert parse_path("a.b[2]") == ("a", "b", 2)
