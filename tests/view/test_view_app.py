"""`agentbench view` over HTTP (loopback): every page, filters and links, transcripts, escaping, the
read-only SQL box, compare, the guard against writes and foreign hosts, and the command itself."""

from __future__ import annotations

import asyncio
import html
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlencode

import aiohttp
import duckdb
import pytest
from view_support import ALPHA_OS, HOSTILE, HOSTILE_ID, JUDGED_ID, REPEATS, get, viewer, write_known, writer

from agentbench_async.analytics import load, scores
from agentbench_async.analytics.compare import compare_results, pick_side
from agentbench_async.analytics.compared import compared_env_scores
from agentbench_async.analytics.loading import Results
from agentbench_async.analytics.terminal import pct
from agentbench_async.view import Source


def _text(page: str) -> str:
    """The visible text of a page (tags dropped, entities decoded, whitespace squeezed)."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def _rows(page: str, table: str) -> list[str]:
    body = re.search(rf'data-table="{table}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert body, f"no table {table}"
    return re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)


async def test_overview_shows_runs_scores_with_intervals_and_oa(known_file: Path) -> None:
    # alpha played one os task beta did not (the hostile one): the models are compared on the tasks both finished
    with load(known_file) as res:
        expected = compared_env_scores(res)
        overall = scores.overall(expected)
        every = scores.env_scores(res)
    async with viewer([known_file]) as base:
        for _ in range(100):  # the bootstrap intervals are computed in the background; the page says so meanwhile
            status, page, _ = await get(base + "/")
            if "computing" not in page:
                break
            assert 'data-refresh="3"' in page and "bootstrap interval: computing…" in page
            await asyncio.sleep(0.1)
    assert status == 200 and 'data-refresh' not in page
    text = _text(page)
    assert "run-known" in text and "alpha, beta" in text
    for r in expected.iter_rows(named=True):
        ci = f"{pct(r['ci_low'])}–{pct(r['ci_high'])} ({r['ci_method']})"
        assert f"{r['model']} · {r['env']} {r['metric']} {pct(r['score'])} {ci} {r['n']}" in text
    alpha = overall.filter(overall["model"] == "alpha").row(0, named=True)
    assert f"alpha {alpha['oa']:.2f} OA (partial: 2 of 8 environments: OS, KG)" in text
    assert 'data-plot="scores"' in page
    assert "Settings: AgentBench v0.2 settings." in text
    assert all(row.rstrip().endswith("AgentBench v0.2 settings</td>") for row in _rows(page, "scores"))
    assert f"90 of 91 tasks finished by every model; compared on those (scores and OA; os {10 * REPEATS} of {10 * REPEATS + 1})" in text
    alpha_os = every.filter((every["model"] == "alpha") & (every["env"] == "os")).row(0, named=True)
    assert alpha_os["n"] == 10 * REPEATS + 1 and len(_rows(page, "scores-all")) == every.height
    assert f"alpha · os {pct(alpha_os['score'])} {alpha_os['n']}" in _text(page.split('data-table="scores-all"')[1])


async def test_overview_names_the_settings_that_differ_beside_the_scores(tmp_path: Path) -> None:
    path = writer(tmp_path)("full", {("alpha", "os"): ALPHA_OS},
                            config={"models": [{"name": "alpha"}], "envs": ["os"], "history": "full", "data_dir": str(tmp_path)})
    async with viewer([path]) as base:
        _, page, _ = await get(base + "/")
        _, episode, _ = await get(base + "/episode?id=" + quote("alpha/os/test/t000/0"))
    text = _text(page)
    assert "Settings that differ from AgentBench v0.2: history: full — not comparable to the paper" in text
    assert "AgentBench v0.2 settings" not in text
    assert [re.sub(r"<[^>]+>", "", row.split("<td")[-1].split(">", 1)[1]) for row in _rows(page, "scores")] == ["differs: history"]
    assert "os (test, builtin) — settings differ from AgentBench v0.2: history" in _text(episode)  # the label keeps its footnote


async def test_failure_cell_opens_its_episodes_and_each_its_transcript(known_file: Path) -> None:
    async with viewer([known_file]) as base:
        _, page, _ = await get(base + "/failures")
        cells = re.findall(r'<a class="cell h\d" data-class="([a-z_]+)" href="([^"]+)">(\d+)', page)
        cell = next((html.unescape(href), int(n)) for cls, href, n in cells if cls == "invalid_format" and "beta" in href)
        assert cell[1] == 2 * REPEATS  # beta/os has two invalid_format outcomes per repeat
        assert "Invalid Format" in page and 'data-plot="failure-classes"' in page
        _, listing, _ = await get(base + cell[0])
        assert f"{2 * REPEATS} episodes match" in _text(listing)
        rows = _rows(listing, "episodes")
        assert len(rows) == 2 * REPEATS and all('data-class="invalid_format"' in r for r in rows)
        first = html.unescape(re.search(r'<a href="([^"]+)" class="episode">', rows[0]).group(1))  # type: ignore[union-attr]
        _, transcript, _ = await get(base + first)
    text = _text(transcript)
    assert "status invalid_format" in text and "beta/os/test/t004/0" in text
    assert "invalid" in text and "no action found in reply 2" in text


async def test_episode_filters_paginate_and_live_in_the_url(known_file: Path) -> None:
    async with viewer([known_file]) as base:
        _, first, _ = await get(base + "/episodes?model=alpha&env=os")
        total = 10 * REPEATS + 1  # ten outcomes per repeat and the hostile episode
        assert f"{total} episodes match · page 1 of 2" in _text(first)
        assert len(_rows(first, "episodes")) == 50
        nxt = html.unescape(re.search(r'<a href="([^"]+)" class="next">', first).group(1))  # type: ignore[union-attr]
        assert "model=alpha" in nxt and "env=os" in nxt and "page=2" in nxt
        _, second, _ = await get(base + nxt)
        assert len(_rows(second, "episodes")) == total - 50

        async def count(**params: str) -> int:
            status, page, _ = await get(base + "/episodes?" + urlencode(params))
            assert status == 200, page
            return int(re.search(r"([\d,]+) episodes? match", _text(page)).group(1).replace(",", ""))  # type: ignore[union-attr]

        assert await count(model="alpha", env="os", task="t001") == REPEATS
        assert await count(model="beta", repeat="3") == 10
        assert await count(status="completed_success") == (4 + 1 + 1) * REPEATS
        assert await count(status="env_error") == REPEATS
        assert await count(q="rm -rf") == REPEATS  # in the episode's error
        assert await count(q="window.__pwned") == 1  # only in the transcript's messages
        status, page, _ = await get(base + "/episodes?repeat=first")
    assert status == 400 and "repeat=&#x27;first&#x27;: expected a whole number" in page


async def test_transcript_shows_turns_actions_validity_http_attempts_and_judge_calls(known_file: Path) -> None:
    async with viewer([known_file]) as base:
        _, page, _ = await get(base + "/episode?id=" + quote("alpha/os/test/t003/0"))
        _, judged, _ = await get(base + "/episode?id=" + quote(JUDGED_ID))
        status, missing, _ = await get(base + "/episode?id=" + quote("alpha/os/test/t003/9"))
    text = _text(page)
    assert "Task t003: do the thing" in text and "Think step 1. Act: do(1)" in text
    assert "action do(1) validity valid" in text and "observation ok 1" in text
    # t003 (index 3): its first call got a 429 with Retry-After 1.5 s, then a retry succeeded
    assert "HTTP attempts: 2 attempts, 1 retry" in text
    assert "agent alpha 1 1 429 63 1.5" in text and "HTTP 429 rate limited" in text
    assert re.search(r'data-turn="4" data-role="assistant"', page)
    assert 'data-section="judge"' not in page
    judged_text = _text(judged)
    assert 'data-section="judge"' in judged and "Judge calls: 2 attempts, 1 retry" in judged_text
    assert "judge judge-model 1 1 200 321" in judged_text
    assert status == 404 and "did you mean" in missing


async def test_model_output_is_escaped_and_scripts_are_not_allowed(known_file: Path) -> None:
    async with viewer([known_file]) as base:
        _, page, headers = await get(base + "/episode?id=" + quote(HOSTILE_ID))
        _, listing, _ = await get(base + "/episodes?q=bold")
    for body in (page, listing):
        assert "<script>window" not in body and "<img src=x" not in body and "<b>bold" not in body
    assert html.escape(HOSTILE) in page  # shown as text: the reply, action, observation and error
    assert page.count(html.escape(HOSTILE)) >= 4
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/view.js" defer>']
    assert "script-src 'self'" in headers["Content-Security-Policy"]


async def test_sql_box_answers_selects_as_table_and_csv_and_refuses_writes(known_file: Path) -> None:
    before = (known_file.stat().st_mtime_ns, known_file.read_bytes())
    async with viewer([known_file]) as base:
        status, page, _ = await get(base + "/sql?" + urlencode({"q": "SELECT model, count(*) AS n FROM episodes GROUP BY model ORDER BY model"}))
        assert status == 200
        assert [_text(r).strip() for r in _rows(page, "sql")] == [f"alpha {16 * REPEATS + 1}", f"beta {10 * REPEATS}"]
        assert "env_scores" in _text(page)  # the list of tables and views
        async with aiohttp.ClientSession() as session, session.post(base + "/sql.csv", data=_csv_form(page)) as resp:
            body = await resp.read()
            assert resp.headers["Content-Type"].startswith("text/csv") and "X-AgentBench-Cut" not in resp.headers
        assert body == f"model,n\nalpha,{16 * REPEATS + 1}\nbeta,{10 * REPEATS}\n".encode()
        _, big, _ = await get(base + "/sql?" + urlencode({"q": "SELECT t.* FROM turns AS t, range(3)"}))
        assert "first 1,000 shown" in _text(big) and len(_rows(big, "sql")) == 1000
        refused = {
            "DROP VIEW episodes": "DROP statements are refused",
            "INSERT INTO episodes SELECT * FROM episodes": "INSERT statements are refused",
            "COPY episodes TO '/tmp/x.csv'": "COPY statements are refused",
            f"ATTACH '{known_file}' AS w": "ATTACH statements are refused",
            "CREATE TABLE t AS SELECT 1": "CREATE statements are refused",
            "SELECT 1; DROP VIEW episodes": "one statement at a time",
            "SELECT * FROM read_text('/etc/passwd')": "file system operations are disabled",
            "SELECT * FROM nowhere": "nowhere",
        }
        for query, message in refused.items():
            status, page, _ = await get(base + "/sql?" + urlencode({"q": query}))
            assert status in (400, 403) and message in _text(page), (query, _text(page)[-400:])
        async with aiohttp.ClientSession() as session:
            async with session.post(base + "/sql.csv", data={**_csv_form(big), "q": "DELETE FROM episodes"}) as resp:
                assert resp.status == 403 and "DELETE statements are refused" in _text(await resp.text())
    assert (known_file.stat().st_mtime_ns, known_file.read_bytes()) == before


def _csv_form(page: str) -> dict[str, str]:
    """The hidden fields of the SQL page's download CSV form (the query and the server's token), as a browser posts them."""
    form = re.search(r'<form class="csv" method="post" action="/sql.csv">(.*?)</form>', page, re.S)
    assert form, "no download CSV form on the page"
    return {name: html.unescape(value) for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', form.group(1))}


async def test_csv_download_answers_only_its_own_page_and_is_bounded(known_file: Path) -> None:
    """Issue 37: the export ran on any GET (a link on any web site could start a 169 MB export); now it is a POST with
    the token only the viewer's own page holds, from its own origin, and stops at a row and a byte bound."""
    query = "SELECT t.seq, repeat('x', 1000) AS pad FROM turns AS t, range(3)"
    async with viewer([known_file], csv_max_rows=50, csv_max_bytes=20_000) as base, aiohttp.ClientSession() as session:
        _, page, _ = await get(base + "/sql?" + urlencode({"q": query}))
        form = _csv_form(page)
        assert form["q"] == query and len(form["token"]) >= 32
        assert "the CSV has up to 50 rows" in _text(page)
        async with session.get(base + "/sql.csv?" + urlencode({"q": query})) as resp:  # a plain link, an <img>, a redirect
            assert resp.status == 405 and "POST from the SQL page's own button" in await resp.text()
        for data, headers in (({"q": query}, {}), ({**form, "token": "x" * 43}, {}),  # no token, a guessed one
                              (form, {"Origin": "https://attacker.example"})):  # another site's form with a stolen token
            async with session.post(base + "/sql.csv", data=data, headers=headers) as resp:
                assert resp.status == 403 and "needs this server's token" in await resp.text(), (data, headers)
        async with session.post(base + "/sql.csv", data=form, headers={"Origin": base}) as resp:  # the page's own button
            assert resp.status == 200
            body, cut = await resp.read(), resp.headers["X-AgentBench-Cut"]
        lines = body.decode().splitlines()
        assert lines[0] == "seq,pad" and len(body) <= 20_000 and body.endswith(b"\n")
        assert len(lines) - 1 == 19 and cut == "first 19 rows: the download stops at 20,000 bytes (agentbench view --csv-max-rows/--csv-max-mib)"
        async with session.post(base + "/sql.csv", data={**form, "q": "SELECT range AS n FROM range(1000)"}) as resp:
            body, cut = await resp.read(), resp.headers["X-AgentBench-Cut"]
        assert body.decode().splitlines() == ["n", *map(str, range(50))] and cut.startswith("first 50 rows: the download stops at 50 rows")
    async with viewer([known_file]) as base, aiohttp.ClientSession() as session:  # another server: the first one's token is no key
        async with session.post(base + "/sql.csv", data=form) as resp:
            assert resp.status == 403


async def test_only_gets_from_loopback_names_are_answered(known_file: Path) -> None:
    async with viewer([known_file]) as base, aiohttp.ClientSession() as session:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            async with session.request(method, base + "/sql", data={"q": "DROP VIEW episodes"}) as resp:
                assert resp.status == 405 and "read-only" in await resp.text()
        async with session.get(base + "/", headers={"Host": "attacker.example:80"}) as resp:
            assert resp.status == 403  # DNS rebinding: a page of another site reaching the loopback port
        for host in ("localhost", "127.0.0.1"):
            async with session.get(base + "/", headers={"Host": f"{host}:1"}) as resp:
                assert resp.status == 200
        for asset, kind in (("view.css", "text/css"), ("view.js", "javascript"), ("favicon.svg", "image/svg+xml")):
            async with session.get(f"{base}/static/{asset}") as resp:  # shipped with the package (the wheel too)
                assert resp.status == 200 and kind in resp.headers["Content-Type"]
        async with session.get(base + "/nowhere") as resp:
            assert resp.status == 404


async def test_compare_two_models_of_a_file_and_one_model_of_two_files(known_file: Path, tmp_path: Path) -> None:
    other = write_known(tmp_path)  # same tasks; alpha's os outcomes replaced by beta's below
    con = duckdb.connect(str(other))
    con.execute("UPDATE episodes SET status = 'completed', success = false, score = 0.0 WHERE model = 'alpha' AND env = 'os' "
                "AND task_id IN ('t000', 't001')")
    con.close()
    with load(known_file) as res:
        expected = compare_results(res, res, pick_side(res, "alpha", None, which="A"), pick_side(res, "beta", None, which="B"),
                                   "alpha", "beta")
    with load(known_file) as res_a, load(other) as res_b:
        across = compare_results(res_a, res_b, pick_side(res_a, "alpha", None, which="A"), pick_side(res_b, "alpha", None, which="B"),
                                 "a", "b")
    async with viewer([known_file]) as base:
        _, page, _ = await get(base + "/compare?ma=alpha&mb=beta")
    text = _text(page)
    t = expected.total
    assert f"{t.pairs} pairs: {t.a_only} tasks only A solved, {t.b_only} only B solved" in text
    assert f"Tasks that flipped ({expected.flips.height}" in text
    assert len(_rows(page, "flips")) == expected.flips.height
    async with viewer([known_file, other]) as base:
        _, page, _ = await get(base + "/compare?fa=1&ma=alpha&fb=2&mb=alpha")
        _, same, _ = await get(base + "/compare?fa=1&ma=alpha&fb=1&mb=alpha")
        links = re.findall(r'<a href="(/episode\?[^"]+)"', page.split('data-table="flips"')[1])  # the flips table's
        _, flipped, _ = await get(base + html.unescape(links[1]))
        # the failure-class changes beside them: a matrix A class x B class whose counts link an example of A
        matrix = page.split('data-table="class-changes"')[1].split("</table>")[0]
        _, example, _ = await get(base + html.unescape(re.findall(r'<a href="(/episode\?[^"]+)"', matrix)[0]))
    text = _text(page)
    assert across.total.a_only == 2 * REPEATS and f"{across.total.a_only} tasks only A solved, 0 only B solved" in text
    assert "A = alpha (known.duckdb) vs B = alpha (known.duckdb)" in text
    assert "same model of the same file" in _text(same)
    assert "file=1" in links[0] and "file=2" in links[1]
    assert f"file {other}" in _text(flipped) and "status completed (wrong)" in _text(flipped)
    changed = across.class_changes.filter(across.class_changes["class_b"] == "completed_wrong")
    assert "Failure-class changes" in text and changed["episodes"].sum() == 2 * REPEATS
    assert "file=1" in matrix and f"file {known_file}" in _text(example)


async def test_live_page_of_finished_files(known_file: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.duckdb"
    shutil.copy(known_file, copy)
    async with viewer([known_file, copy]) as base:
        _, both, _ = await get(base + "/live")
    assert both.count('data-table="streams"') == 2
    usage = [[_text(r) for r in _rows(part, "usage")] for part in both.split('data-figure="episodes done"')[1:]]
    assert len(usage) == 2 and usage[0] == usage[1] and len(usage[0]) == 3  # per file: alpha agent, beta agent, the judge
    async with viewer([known_file]) as base:
        _, page, _ = await get(base + "/live")
        _, fragment, _ = await get(base + "/live?fragment=1")
    text = _text(page)
    # a file no run writes: its env_error, model_error and cancelled episodes (one of each per repeat) are not done, a
    # resume re-runs them, and the page says so instead of "done"
    stored, rerun = 16 * REPEATS + 1 + 10 * REPEATS, 3 * REPEATS
    assert "not running, and not finished" in text and f"episodes done {stored - rerun}/{stored}" in text
    assert f"ETA stopped: {rerun} episodes to re-run" in text
    assert f"it re-runs {rerun} episodes ({REPEATS} cancelled, {REPEATS} env_error, {REPEATS} model_error)" in text
    rows = [_text(r) for r in _rows(page, "streams")]
    # per stream too: alpha's kg has one cancelled episode per repeat, not done (before: 36/36, a full bar)
    assert any(r.startswith(f" alpha · kg {5 * REPEATS}/{6 * REPEATS}") for r in rows), rows
    assert "data-refresh" in page and fragment.startswith('<div id="live">') and "<html" not in fragment
    assert "HTTP 429" in text and "cost (finished episodes) $" in text


def test_view_command_serves_the_files_and_rejects_what_is_not_a_result_file(known_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    done = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "view", str(bad)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "notes.txt" in done.stderr
    proc = subprocess.Popen([sys.executable, "-m", "agentbench_async.cli", "view", str(known_file), "--port", "0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert found, line
        import urllib.request

        with urllib.request.urlopen(found.group(1) + "failures", timeout=30) as resp:  # noqa: S310 (loopback)
            assert resp.status == 200 and b"failure-matrix" in resp.read()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_names(host: str) -> None:
    from agentbench_async.view.app import is_loopback

    assert is_loopback(host) and not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")


def _slow_count(res: Results) -> int:
    """A slow analytic (module level: it runs in the viewer's helper process): logs its call, waits for a gate file."""
    folder = Path(res.paths[0]).parent
    with (folder / "calls").open("a") as log:
        log.write("call\n")
    for _ in range(300):
        if (folder / "gate").exists():
            break
        time.sleep(0.1)
    return int(res.sql("SELECT count(*) AS n FROM episodes")["n"][0])


def test_slow_analytics_run_once_in_the_background_and_are_reused(known_file: Path, tmp_path: Path) -> None:
    path, newer = tmp_path / "known.duckdb", tmp_path / "newer" / "known.duckdb"
    newer.parent.mkdir()
    shutil.copy(known_file, path)
    shutil.copy(known_file, newer)
    source = Source([path])
    try:
        with load(path) as res, load(newer) as res2:
            assert source.memo_ready(res, "slow", _slow_count) is None  # started in the background, the page does not wait
            assert source.memo_ready(res, "slow", _slow_count) is None  # still running: not started twice
            assert source.memo_ready(res2, "slow", _slow_count) is None  # another data version waits its turn
            time.sleep(0.5)
            assert not (newer.parent / "calls").exists()
            (tmp_path / "gate").touch()
            assert source.memo(res, "slow", _slow_count) == 26 * REPEATS + 1  # waits for that same computation
            assert source.memo_ready(res, "slow", _slow_count) == 26 * REPEATS + 1
            (newer.parent / "gate").touch()
            assert source.memo_ready(res2, "slow", _slow_count) is None  # now it starts
            assert source.memo(res2, "slow", _slow_count) == 26 * REPEATS + 1
        assert (tmp_path / "calls").read_text() == "call\n" and (newer.parent / "calls").read_text() == "call\n"
    finally:
        source.close()
