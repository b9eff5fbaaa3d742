"""`agentbench view FILE --export DIR`: the static site, opened from file:// in Debian's headless Chromium (view_browser.py):
overview, failure matrix -> episode list -> transcript by real clicks, the list's pages, the stylesheet under the
pages' own Content-Security-Policy, a hostile reply that stays text; every link of every page leads to a written
file; the same site served by a plain static host; refusals of a non-empty folder."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from aiohttp import web
from engine_support import serve_app
from support import require
from view_browser import Browser, chromium
from view_support import HOSTILE, HOSTILE_ID

from agentbench_async.analytics import load
from agentbench_async.view.export import export
from agentbench_async.view.html import CSP


@pytest.fixture(scope="module")
def site(known_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export") / "site"
    done = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "view", str(known_file), "--export", str(folder)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"open {(folder / 'index.html').as_uri()}\n" in done.stderr  # on one line, to copy
    assert re.search(r"exported \d+ transcripts and \d+ pages of \d+ episode lists to ", done.stderr)
    return folder


def _need_chromium() -> None:
    require(chromium() is not None, "Debian's chromium is not installed (apt-get install -y chromium)")


def _refs(page: Path) -> list[str]:
    return [html.unescape(m) for m in re.findall(r'\b(?:href|src)="([^"]*)"', page.read_text(encoding="utf-8"))]


def test_every_link_of_every_page_leads_to_a_written_file_and_every_transcript_is_there(site: Path, known_file: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CSP)}">' in text, page
        assert "<script>" not in text and "style=" not in text, page  # nothing inline: the policy allows only static/
        for ref in _refs(page):
            assert not ref.startswith(("/", "http:", "https:")), (page, ref)  # relative: file:// and any static host
            assert (page.parent / ref).resolve().is_file(), (page, ref)
        assert 'action="' not in text and 'data-not-exported="/episode' not in text, page  # no form, no dead list/episode link
    with load(known_file) as res:
        stored = res.sql("SELECT count(*) AS n FROM episodes")["n"][0]
        total = res.sql("SELECT count(*) AS n FROM episode_outcomes")["n"][0]
    transcripts = list(site.glob("episodes/*/*.html"))
    assert len(transcripts) == stored
    nav = re.search(r"<nav>(.*?)</nav>", (site / "index.html").read_text(encoding="utf-8")).group(1)  # type: ignore[union-attr]
    assert re.findall(r">([^<]+)</a>", nav) == ["Overview", "Failures", "Episodes"]  # no live, compare or SQL in a static site
    every = site / re.search(r'href="(lists/\d+/1\.html)">Episodes', (site / "index.html").read_text()).group(1)  # type: ignore[union-attr]
    listed = sum(len(re.findall(r'class="episode"', p.read_text())) for p in every.parent.glob("*.html"))
    assert listed == total > 50  # the list of all episodes, over several pages


async def test_export_opens_from_file_in_chromium_and_a_hostile_reply_stays_text(site: Path, tmp_path: Path) -> None:
    _need_chromium()
    async with Browser(tmp_path / "profile") as b:
        await b.goto((site / "index.html").as_uri())
        text = await b.text()
        assert "Scores" in text and "Overall AgentBench score (OA)" in text and "alpha · os" in text
        assert await b.js("getComputedStyle(document.querySelector('header')).display") == "flex"  # the stylesheet loaded under the CSP
        assert await b.js("document.querySelectorAll('[data-table=scores] tbody tr').length") == 3
        await b.click("nav a[href='failures.html']")
        cls, count = await b.js("(() => { const a = [...document.querySelectorAll('a.cell')].find(a => a.dataset.class !== "
                                "'completed_success'); return [a.dataset.class, parseInt(a.textContent)]; })()")
        await b.click(f"a.cell[data-class={cls}]")
        assert (await b.js("location.protocol")) == "file:"
        assert await b.js("[...document.querySelectorAll('[data-table=episodes] .badge')].map(e => e.dataset.class)") == [cls] * count
        assert f"status {cls}" in await b.text()  # the list names its filters (no form: nothing to filter with)
        await b.click("a.episode")
        assert "/episodes/" in await b.js("location.pathname")
        assert await b.js("document.querySelectorAll('section.turn').length") >= 2
        assert await b.js("document.querySelector('.status').dataset.status") in (cls, "completed")

        await b.click("nav a[href$='index.html']")
        await b.click("nav a:nth-child(3)")  # all episodes: page 1, then the next page
        assert "page 1 of" in await b.text()
        await b.click("a.next")
        assert "page 2 of" in await b.text()

        for page in sorted(site.glob("lists/*/*.html")):  # the hostile episode's row, then its transcript
            if f">{HOSTILE_ID}<" in page.read_text(encoding="utf-8"):
                break
        await b.goto(page.as_uri())
        href = await b.js(f"[...document.querySelectorAll('a.episode')].find(a => a.textContent === {HOSTILE_ID!r}).href")
        await b.goto(href)
        assert await b.js("typeof window.__pwned") == "undefined"
        assert await b.js("document.querySelectorAll('main script, main img, main b').length") == 0
        assert HOSTILE in await b.text()
        assert not b.console_errors, b.console_errors


async def test_the_same_site_from_a_plain_static_host(site: Path, tmp_path: Path) -> None:
    _need_chromium()
    app = web.Application()
    app.router.add_static("/results/", site)  # a web server that knows nothing of agentbench, under a sub-path
    async with serve_app(app) as port, Browser(tmp_path / "profile") as b:
        await b.goto(f"http://127.0.0.1:{port}/results/index.html")
        await b.click("nav a[href='failures.html']")
        await b.click("a.cell")
        await b.click("a.episode")
        assert unquote(urlparse(await b.js("location.href")).path).startswith("/results/episodes/")
        assert await b.js("getComputedStyle(document.querySelector('header')).display") == "flex"
        assert not b.console_errors, b.console_errors


def test_a_folder_with_files_is_refused_and_nothing_is_written(known_file: Path, tmp_path: Path) -> None:
    folder = tmp_path / "busy"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    done = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "view", str(known_file), "--export", str(folder)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "not empty" in done.stderr and str(folder) in " ".join(done.stderr.split())
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    with pytest.raises(Exception, match="that is a file"):
        export([known_file], folder / "notes.txt")


def test_two_files_give_each_attempt_its_own_transcript_linked_from_the_other(known_file: Path, tmp_path: Path) -> None:
    copy = tmp_path / "again.duckdb"
    copy.write_bytes(known_file.read_bytes())
    calls: list[tuple[int, int]] = []
    done = export([known_file, copy], tmp_path / "site", progress=lambda n, total: calls.append((n, total)))
    with load(known_file) as res:
        stored = res.sql("SELECT count(*) AS n FROM episodes")["n"][0]
    with load([known_file, copy]) as res:
        deciding = res.sql("SELECT count(*) AS n FROM episode_outcomes")["n"][0]  # one attempt of each episode decides
    assert done.episodes == 2 * stored == len(list((tmp_path / "site").glob("episodes/*/*.html")))
    assert calls[-1] == (2 * stored, 2 * stored)
    every = tmp_path / "site" / re.search(r'href="(lists/\d+/1\.html)">Episodes',  # type: ignore[union-attr]
                                          (tmp_path / "site" / "index.html").read_text()).group(1)
    text = "".join(p.read_text(encoding="utf-8") for p in every.parent.glob("*.html"))
    rows = re.findall(r'<td class="l">#(\d)</td><td class="l"><a href="([^"]+)" class="episode">([^<]+)</a>', text)
    assert len(rows) == deciding
    for no, href, episode in rows:
        page = every.parent / html.unescape(href)
        shown = page.read_text(encoding="utf-8")
        assert f"<dd>{html.escape(str([known_file, copy][int(no) - 1]))}</dd>" in shown and html.escape(episode) in shown
        other = re.search(r"Other attempts of this episode.*?<a href=\"([^\"]+)\"", shown)
        assert other, episode  # the same episode in the other file, one click away
        twin = (page.parent / html.unescape(other.group(1))).read_text(encoding="utf-8")
        assert f"<dd>{html.escape(str([known_file, copy][2 - int(no)]))}</dd>" in twin
