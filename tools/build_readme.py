"""Build README.md from docs/index.md, the documentation site's front page (a test checks the committed README
is up to date). Links between pages are relative inside docs/; in the README they point into docs/.

    python tools/build_readme.py            # write README.md
    python tools/build_readme.py --check    # exit 1 when README.md is out of date
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "index.md"
NOTE = "<!-- Generated from docs/index.md by tools/build_readme.py: edit that page, then run the tool. -->\n"


def _into_docs(match: re.Match[str]) -> str:
    target = match.group(2)
    if re.match(r"^(?:[a-z][a-z0-9+.-]*:|#|/)", target):  # a URL, an anchor or an absolute path: as written
        return match.group(0)
    return f"{match.group(1)}(docs/{target})"


def build() -> str:
    text = SOURCE.read_text(encoding="utf-8")
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        out.append(line if fenced else re.sub(r"(\]|!\[[^\]]*\])\(([^)\s]+)\)", _into_docs, line))
    return NOTE + "\n".join(out).strip() + "\n"


if __name__ == "__main__":
    text = build()
    if "--check" in sys.argv:
        current = (ROOT / "README.md").read_text(encoding="utf-8")
        sys.exit(0 if current == text else "README.md is out of date: run python tools/build_readme.py")
    (ROOT / "README.md").write_text(text, encoding="utf-8")
    print("README.md written")
