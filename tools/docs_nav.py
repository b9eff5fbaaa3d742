"""MkDocs hook: every page under docs/ is reachable from the navigation. A page that ``nav`` in mkdocs.yml does
not name (one just written) is added under "More pages", titled by its first heading, so the strict build keeps
passing while it waits for its place in ``nav``; ``mkdocs build`` says so in one line per page."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

LOG = logging.getLogger("mkdocs.hooks.docs_nav")
SECTION = "More pages"
GENERATED_DIR = "reference/"  # pages tools/reference_pages.py adds: not on disk, named in nav


def named_pages(nav: Any) -> set[str]:
    """Every page path a ``nav`` value names."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return {p for item in nav for p in named_pages(item)}
    if isinstance(nav, dict):
        return {p for value in nav.values() for p in named_pages(value)}
    return set()


def pages_left_out(docs_dir: Path, nav: Any) -> list[str]:
    """Pages under ``docs_dir`` (Markdown files) that ``nav`` does not name, in path order."""
    named = named_pages(nav)
    return sorted(rel for p in docs_dir.rglob("*.md") if (rel := p.relative_to(docs_dir).as_posix()) not in named)


def _title(page: Path) -> str:
    match = re.search(r"^# (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return match.group(1).replace("`", "").strip() if match else page.stem


def on_config(config: Any) -> Any:
    if not config.nav:
        return config  # no nav: MkDocs lists every page itself
    docs_dir = Path(config.docs_dir)
    left_out = pages_left_out(docs_dir, config.nav)
    for rel in left_out:
        LOG.info("%s is not in mkdocs.yml's nav: listed under %r until it is", rel, SECTION)
    if left_out:
        config.nav.append({SECTION: [{_title(docs_dir / rel): rel} for rel in left_out]})
    return config
