"""The public surface: ``plait.__all__`` lists exactly the public names."""

from __future__ import annotations

import plait


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in vars(plait) if not name.startswith("_")}
    modules = {"actors", "decisions", "errors", "graphs", "mesh", "models", "runs", "tools",
               "annotations"}
    assert set(plait.__all__) == public - modules
    for name in plait.__all__:
        assert getattr(plait, name).__doc__, f"{name} has no docstring"
