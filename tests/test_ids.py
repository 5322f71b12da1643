"""One id scheme: time-sortable UUIDv7 ids, made in plait/ids.py and nowhere else."""

from __future__ import annotations

import ast
import re
import uuid
from pathlib import Path

from plait.ids import RUN_ID_PREFIX, new_decision_id, new_id, new_run_id

ROOT = Path(__file__).resolve().parent.parent / "plait"
HEX = re.compile(r"^[0-9a-f]{32}$")


def test_ids_are_uuid7_hex_and_sort_by_creation() -> None:
    made = [new_id() for _ in range(2000)]
    assert all(HEX.match(i) for i in made)
    assert all(uuid.UUID(hex=i).version == 7 for i in made[:10])
    assert made == sorted(made) and len(set(made)) == len(made)


def test_run_and_decision_ids_keep_their_readable_prefix() -> None:
    first, second = new_run_id(), new_run_id()
    assert first.startswith(RUN_ID_PREFIX) and HEX.match(first.removeprefix(RUN_ID_PREFIX))
    assert first < second
    assert new_run_id("run_").startswith("run_")
    decision = new_decision_id()
    assert decision.startswith("dec_") and HEX.match(decision.removeprefix("dec_"))


def test_no_other_module_makes_ids_its_own_way() -> None:
    """No uuid, os.urandom or secrets.token_hex outside ids.py; secrets may still mint
    credentials (an API token's secret), which are not ids."""
    found: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == ROOT / "ids.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Attribute) and node.attr in {"urandom", "token_hex"}:
                names = [node.attr]
            for name in names:
                if name.split(".")[0] in {"uuid", "uuid_utils", "urandom", "token_hex"}:
                    found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {name}")
    assert not found, "ids made outside plait/ids.py:\n  " + "\n  ".join(found)
