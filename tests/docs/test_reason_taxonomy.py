"""Every failure-reason label an environment can write (its reasons module's LABELS) is documented on its page, so a
researcher reading `failure_reasons` finds what each label means."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "envs"


@pytest.mark.parametrize(("module", "page"), [("db", "db"), ("os_interaction", "os"), ("alfworld", "alfworld"), ("webshop", "webshop")])
def test_every_reason_label_is_on_the_environment_s_page(module: str, page: str) -> None:
    labels = importlib.import_module(f"agentbench_async.envs.{module}.reasons").LABELS
    text = " ".join((DOCS / f"{page}.md").read_text(encoding="utf-8").split())
    missing = [label for label in labels if f"`{label}`" not in text]
    assert not missing, f"docs/envs/{page}.md does not name {missing}"
