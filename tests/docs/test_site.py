"""The documentation site: `mkdocs build --strict` passes with no warning, every page under docs/ is built and in
the navigation (one that mkdocs.yml's nav leaves out under "More pages"), no link or anchor is broken and a broken
one fails the build, and the site opened from disk in Chromium renders its pages and finds "retry_after_max_s"
with its offline search."""

from __future__ import annotations

import asyncio
import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlsplit

import pytest

from support import REPO, require


def _mkdocs(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=300, env=env)  # fmt: skip


def _need_mkdocs() -> None:
    require(importlib.util.find_spec("mkdocs") is not None and importlib.util.find_spec("material") is not None,
            "the docs extra is not installed (pip install -e '.[docs]')")  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_mkdocs()
    out = tmp_path_factory.mktemp("site")
    done = _mkdocs(REPO, out)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr  # strict fails on warnings; none printed either
    return out


def test_every_page_under_docs_is_built_and_in_the_navigation(site: Path) -> None:
    written = sorted(p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md"))
    generated = ["reference/cli.md", "reference/configuration.md", "reference/env-options.md", "reference/schema.md",
                 "reference/statuses.md"]  # fmt: skip
    nav = set(re.findall(r'class="md-nav__link[^"]*"[^>]*href="([^"#]+)"|href="([^"#]+)"[^>]*class="md-nav__link',
                         (site / "index.html").read_text(encoding="utf-8")))  # fmt: skip
    linked = {a or b for a, b in nav}
    for page in written + generated:
        built = page.removesuffix(".md") + ".html"
        assert (site / built).is_file(), page
        assert "<h1" in (site / built).read_text(encoding="utf-8"), page
        assert built in linked, f"{page} is not in the site's navigation"


def _ids(page: Path, cache: dict[Path, set[str]]) -> set[str]:
    if page not in cache:
        cache[page] = set(re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8")))
    return cache[page]


def test_no_broken_link_or_anchor_in_the_built_site(site: Path) -> None:
    ids: dict[Path, set[str]] = {}
    checked = 0
    for page in site.rglob("*.html"):
        if page.name == "404.html":
            continue  # a web server's error page: its links are absolute to the server's root
        text = page.read_text(encoding="utf-8")
        assert not re.findall(r'<(?:script|img|link)\b[^>]*\b(?:src|href)="(?:https?:)?//', text), page  # nothing from the network
        for ref in re.findall(r'\b(?:href|src)="([^"]*)"', text):
            ref = html.unescape(ref)
            parts = urlsplit(ref)
            if parts.scheme in ("http", "https", "mailto", "data"):
                continue  # a link out of the site (Ray's documentation, the theme's credit)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            assert target.is_file(), (page, ref)
            if parts.fragment and target.suffix == ".html":
                assert unquote(parts.fragment) in _ids(target, ids), (page, ref)
            checked += 1
    assert checked > 1000


def _copy_project(dest: Path) -> Path:
    shutil.copytree(REPO / "docs", dest / "docs")
    shutil.copytree(REPO / "tools", dest / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "mkdocs.yml", dest / "mkdocs.yml")
    return dest


def test_a_broken_link_or_anchor_fails_the_strict_build_and_a_page_left_out_of_nav_is_listed(tmp_path: Path) -> None:
    _need_mkdocs()
    broken = _copy_project(tmp_path / "broken")
    page = broken / "docs" / "usage.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [the limits](limts.md) and [retries](limits.md#no-such-section).\n")
    done = _mkdocs(broken, tmp_path / "site1")
    assert done.returncode != 0
    assert "'limts.md'" in done.stderr and "usage.md" in done.stderr and "no-such-section" in done.stderr
    orphan = _copy_project(tmp_path / "orphan")
    (orphan / "docs" / "notes.md").write_text("# Field notes\n\nWritten, not yet in nav.\n")
    done = _mkdocs(orphan, tmp_path / "site2")
    assert done.returncode == 0, done.stderr
    assert "notes.md is not in mkdocs.yml's nav: listed under 'More pages' until it is" in done.stderr
    front = (tmp_path / "site2" / "index.html").read_text(encoding="utf-8")
    assert "More pages" in front and 'href="notes.html"' in front and "Field notes" in front


def _browser() -> ModuleType:
    """tests/view/view_browser.py: Chromium through the DevTools protocol."""
    if "view_browser" not in sys.modules:
        spec = importlib.util.spec_from_file_location("view_browser", REPO / "tests" / "view" / "view_browser.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["view_browser"] = module
    return sys.modules["view_browser"]


async def _press(b: object, selector: str) -> None:
    box = await b.js(f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect(); "  # type: ignore[attr-defined]
                     "return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    for kind in ("mousePressed", "mouseReleased"):
        await b.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1})  # type: ignore[attr-defined]


async def _until(b: object, expression: str, seconds: float = 30) -> object:
    for _ in range(int(seconds / 0.2)):
        value = await b.js(expression)  # type: ignore[attr-defined]
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"never true: {expression}")


async def test_site_opened_from_disk_in_chromium_renders_and_searches_offline(site: Path, tmp_path: Path) -> None:
    vb = _browser()
    require(vb.chromium() is not None, "Debian's chromium is not installed (apt-get install -y chromium)")
    async with vb.Browser(tmp_path / "profile") as b:
        for page, heading in (("index.html", "agentbench-async"), ("reference/configuration.html", "Configuration fields"),
                              ("envs/os.html", "Operating System (os)"), ("performance.html", "Performance")):  # fmt: skip
            await b.goto((site / page).as_uri())
            assert await b.js("document.querySelector('article h1').innerText") == heading + "\u00b6", page  # and its permalink
            assert await b.js("document.querySelectorAll('.md-nav__link').length") > 20, page  # the nav rendered
            assert await b.js("getComputedStyle(document.querySelector('.md-header')).position") == "sticky", page  # the theme's CSS
        await b.goto((site / "index.html").as_uri())
        await _press(b, "input.md-search__input")  # as a user: click the search box, type
        await _until(b, "document.querySelector('.md-search-result__meta').innerText === 'Type to start searching'")
        for ch in "retry_after_max_s":
            await b.send("Input.dispatchKeyEvent", {"type": "keyDown", "text": ch, "key": ch})
            await b.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": ch})
        hits = await _until(b, "(() => { const hits = [...document.querySelectorAll('.md-search-result__item > a')].map(a => a.href); "
                               "return hits.some(h => h.includes('h=retry_after_max_s')) && hits; })()")  # results of the whole word
        assert any("reference/configuration.html" in h for h in hits), hits  # type: ignore[union-attr]
        assert any(h.startswith((site / "limits.html").as_uri()) for h in hits), hits  # type: ignore[union-attr]
        assert "matching document" in await b.js("document.querySelector('.md-search-result__meta').innerText")
        await b.click(".md-search-result__item > a[href*='reference/configuration.html']")
        assert (await b.js("location.pathname")).endswith("/reference/configuration.html")
        assert "retry_after_max_s" in await b.text()
        assert not b.console_errors, b.console_errors
