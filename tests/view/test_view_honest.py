"""The viewer never misleads: two configurations of one model x environment are two labelled rows (overview, failure
matrix, compare), environment text is marked as such in transcripts, a running episode shows no placeholders, a page
number past the end shows the last page, and solved-but-not-'completed' episodes are noted."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import quote

import duckdb
from engine_support import serve_app
from view_support import get, viewer, writer

from agentbench_async.view import Source, make_app

from analytics_support import mind2web_rounds, two_configurations  # noqa: E402 (on the path through view_support)


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def _rows(page: str, table: str) -> list[str]:
    body = re.search(rf'data-table="{table}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert body, f"no table {table}"
    return [_text(r).strip() for r in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)]


async def test_two_configurations_are_two_rows_on_every_page(tmp_path: Path) -> None:
    path = two_configurations(writer(tmp_path))
    async with viewer([path]) as base:
        _, overview, _ = await get(base + "/")
        _, failures, _ = await get(base + "/failures")
        _, compare, _ = await get(base + "/compare")
        links = re.findall(r'<a href="(/episodes\?[^"]+)">alpha \(history: full\) · kg', overview)
        _, listing, _ = await get(base + html.unescape(links[0]))
    scores = _rows(overview, "scores")
    assert [r.split(" F1")[0] for r in scores if " · kg" in r] == ["alpha (history: agentbench) · kg", "alpha (history: full) · kg"]
    assert "alpha · kg: 2 configurations, one row each (history: agentbench | history: full)" in _text(overview)
    assert sorted(r.split(" ")[2] for r in _rows(overview, "overall")) == ["agentbench)", "full)"]
    assert "config=bbbb2222" in html.unescape(links[0]) and "4 episodes match" in _text(listing)  # that configuration's only
    matrix = [r.split(" kg ")[0] for r in _rows(failures, "failure-matrix") if " kg " in r]
    assert matrix == ["alpha (history: agentbench)", "alpha (history: full)"]
    paper = [r.split(" kg ")[0] for r in _rows(failures, "paper") if " kg " in r]
    assert paper == matrix
    text = _text(compare)
    assert "One model in two configurations: A and B differ in history: agentbench vs full." in text
    assert "A = alpha (history: agentbench) vs B = alpha (history: full)" in text and "4 pairs" in text
    assert 'name="ca"' in compare and 'name="cb"' in compare  # the configuration of each side is a choice


async def test_view_pool_merges_configurations_on_purpose(tmp_path: Path) -> None:
    path = two_configurations(writer(tmp_path))
    async with serve_app(make_app(Source([path], pool=True))) as port:
        _, overview, _ = await get(f"http://127.0.0.1:{port}/")
    kg = [r for r in _rows(overview, "scores") if " · kg" in r]
    assert len(kg) == 1 and kg[0].startswith("alpha (pooled: 2 configurations) · kg F1") and " 10 " in f" {kg[0]} "  # every episode counted (the paper's denominator)
    assert "--pool: rows merge several configurations (alpha · kg)" in _text(overview)


async def test_transcripts_mark_environment_text_and_show_no_placeholders(tmp_path: Path) -> None:
    path, episode = mind2web_rounds(writer(tmp_path), marked=False)  # a file written before turns.injected
    con = duckdb.connect(str(path))  # and an episode of a killed run, unfinished: its turns so far in live_turns
    con.execute("INSERT INTO live_turns (run_id, episode_id, turn, seq, role, content, model, env) VALUES "
                "('run-m2w', 'alpha/webshop/dev/d1/0', 0, 0, 'user', 'find a candle', 'alpha', 'webshop')")
    con.close()
    async with viewer([path]) as base:
        _, page, _ = await get(base + "/episode?id=" + quote(episode))
        _, running, _ = await get(base + "/episode?id=" + quote("alpha/webshop/dev/d1/0"))
    sections = re.findall(r'<section class="turn role-(\w+)( injected)?" data-turn="(\d)" data-role="\w+" data-by-model="(yes|no)">', page)
    by_model = [(turn, role) for role, _, turn, mine in sections if mine == "yes"]
    assert by_model == [("1", "assistant"), ("2", "assistant")]  # the replies, never the examples after them
    injected = [(turn, role) for role, marked, turn, _ in sections if marked]
    assert injected == [("0", "assistant"), ("1", "assistant"), ("2", "assistant")]
    assert _text(page).count("written by the environment, not the model (assistant role)") == 3
    head = _text(running)
    assert "None" not in head and "?" not in head.split("status")[0]
    assert "env webshop (dev)" in head and "tokens in/out" not in head


async def test_a_page_past_the_end_shows_the_last_page(known_file: Path) -> None:
    async with viewer([known_file]) as base:
        _, page, _ = await get(base + "/episodes?model=alpha&env=os&page=999")
    text = _text(page)
    assert "page 2 of 2" in text and "page 999" not in text
    assert len(_rows(page, "episodes")) > 0


async def test_solved_games_are_noted_beside_the_failure_matrix(tmp_path: Path) -> None:
    path = writer(tmp_path)("ltp", {("alpha", "ltp"): [("task_limit_exceeded", True, 1.0, None)] * 2})
    con = duckdb.connect(str(path))
    con.execute("UPDATE episodes SET details = ?", [json.dumps({"end_reason": "round limit reached"})])
    con.close()
    async with viewer([path]) as base:
        _, failures, _ = await get(base + "/failures")
        _, overview, _ = await get(base + "/")
    assert 'data-class="completed_success"' in failures and 'data-class="task_limit_exceeded"' not in failures
    note = "alpha · ltp: 2 solved episodes ended at the round limit, as AgentBench (status task_limit_exceeded)"
    assert note in _text(failures) and note in _text(overview)
