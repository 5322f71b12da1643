from __future__ import annotations

from pathlib import Path

from plait.graphs.loader import load_graph
from plait.graphs.mermaid import to_mermaid
from plait.graphs.spec import GraphSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_revise_loop_has_next_and_verdict_arrows() -> None:
    text = to_mermaid(load_graph(EXAMPLES / "research_and_verify.json"))
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    assert '    n_draft["draft<br/><i>agent</i>"]' in lines
    assert '    n_verify{"verify<br/><i>verifier</i>"}' in lines
    assert '    n_review_human[/"review_human<br/><i>human</i>"/]' in lines
    assert "    n_draft --> n_verify" in lines
    assert "    n_verify -->|pass| n_review_human" in lines
    assert "    n_verify -->|fail| n_draft" in lines
    assert "    n_review_human --> n_publish" in lines
    assert not any(line.startswith("    n_publish -") for line in lines)
    assert "    class n_draft entry" in lines


def test_fan_out_arrows_are_dotted_and_labelled_by_strategy() -> None:
    lines = to_mermaid(load_graph(EXAMPLES / "fan_out_map.json")).splitlines()
    assert "    n_begin --> n_researcher" in lines
    assert "    n_researcher --> n_fanout" in lines
    assert "    n_fanout -.->|map| n_fetcher" in lines
    assert "    n_fetcher --> n_fanin" in lines
    assert "    n_fanin --> n_end" in lines
    assert '    n_fanout{{"fanout<br/><i>fan out</i>"}}' in lines
    assert '    n_end(["end<br/><i>end</i>"])' in lines
    assert "    class n_begin entry" in lines


def test_broadcast_tee_and_awkward_ids() -> None:
    spec = GraphSpec.model_validate(
        {
            "name": "g",
            "nodes": [
                {"id": "b", "type": "begin"},
                {
                    "id": "fan",
                    "type": "fan_out",
                    "specs": [
                        {"kind": "broadcast", "target_node_id": "w-1", "count": 3},
                        {"kind": "tee", "targets": ["w_1", "t"]},
                    ],
                },
                {"id": "w-1", "type": "agent", "prompt": 'say "hi" <b>'},
                {"id": "w_1", "type": "tool", "tool": "search"},
                {"id": "t", "type": "subgraph", "graph": "child", "next": "e"},
                {"id": "e", "type": "end"},
            ],
            "edges": [{"source": "b", "target": "fan"}, {"source": "t", "target": "e"}],
        }
    )
    lines = to_mermaid(spec).splitlines()
    assert '    n_fan -.->|"broadcast x3"| n_w_1' in lines
    assert "    n_fan -.->|tee| n_w_1_" in lines
    assert "    n_fan -.->|tee| n_t" in lines
    assert lines.count("    n_t --> n_e") == 1  # next and an edge to the same node: one arrow
    assert '    n_w_1_>"w_1<br/><i>tool</i>"]' in lines
    assert '    n_t[["t<br/><i>subgraph</i>"]]' in lines
