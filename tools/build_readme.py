"""Build README.md from docs/README.in.md, the environment pages docs/envs/<env>.md,
docs/distributed.md and docs/reading-results.md (a test checks the committed README is up to date).

    python tools/build_readme.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_ORDER = ("os", "db", "kg", "card_game", "ltp", "alfworld", "webshop", "mind2web")


def _demote(text: str, levels: int) -> str:
    """Push every Markdown heading down ``levels`` levels (outside code fences)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"^#+ ", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out).strip() + "\n"


def build() -> str:
    template = (ROOT / "docs" / "README.in.md").read_text(encoding="utf-8")
    envs = [ROOT / "docs" / "envs" / f"{name}.md" for name in ENV_ORDER]
    sections = "\n".join(_demote(p.read_text(encoding="utf-8"), 2) for p in envs if p.exists())
    reading = (ROOT / "docs" / "reading-results.md").read_text(encoding="utf-8")
    reading = re.sub(r"\]\(([\w-]+\.png)\)", r"](docs/\1)", reading)  # report.png, view.png: next to this page in docs/
    reading = re.sub(r"^## Reading results\n+", "", reading)
    distributed = (ROOT / "docs" / "distributed.md").read_text(encoding="utf-8").strip() + "\n"
    return (template.replace("ENV_SECTIONS\n", sections).replace("READING_RESULTS\n", reading.strip() + "\n")
            .replace("DISTRIBUTED\n", distributed))


if __name__ == "__main__":
    text = build()
    if "--check" in sys.argv:
        current = (ROOT / "README.md").read_text(encoding="utf-8")
        sys.exit(0 if current == text else "README.md is out of date: run python tools/build_readme.py")
    (ROOT / "README.md").write_text(text, encoding="utf-8")
    print("README.md written")
