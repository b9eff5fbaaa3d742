"""The README is generated from docs/index.md and must be current; it shows the two set-up commands and is short."""

from __future__ import annotations

import re
import runpy

from support import REPO


def test_readme_is_built_from_docs():
    build = runpy.run_path(str(REPO / "tools" / "build_readme.py"))["build"]
    assert (REPO / "README.md").read_text(encoding="utf-8") == build(), "run: python tools/build_readme.py"


def test_readme_shows_the_two_commands_and_every_cli_command():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert "bash .ci/setup && .venv/bin/agentbench demo" in text
    assert "bash .ci/setup --test && .venv/bin/python -m pytest -q" in text
    for command in ("agentbench run", "agentbench demo", "agentbench report", "agentbench sql", "agentbench show",
                    "agentbench compare", "agentbench envs", "agentbench serve-mock", "agentbench data pull"):  # fmt: skip
        assert command in text, command


def test_readme_is_a_short_front_door_whose_links_open_pages():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not re.match(r"^[a-z]+:", link)]
    assert len(local) >= 15 and all(link.startswith("docs/") for link in local)
    for link in local:  # every page and image it links to is in the checkout (the generated reference pages are not)
        assert (REPO / link.split("#")[0]).is_file(), link
