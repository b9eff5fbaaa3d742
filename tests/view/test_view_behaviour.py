"""The viewer's failure page says how episodes failed: the share of task-limit episodes that looped or stalled and
the recovery rate after a refused action, per model x environment, with example episodes one click from their
transcripts (and a hostile action in the evidence stays text)."""

from __future__ import annotations

import html
import re
from pathlib import Path

from view_support import get, viewer, writer

from analytics_support import scripted  # noqa: E402 (on the path through view_support)

TLE = ("task_limit_exceeded", False)
HOSTILE_ACTION = "<script>alert(1)</script>"


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


async def test_failure_page_links_loop_and_recovery_examples_to_their_transcripts(tmp_path: Path) -> None:
    loop = [(HOSTILE_ACTION, "Invalid action!", False)] * 3
    stalled = [(q, f"answer {q}", True) for q in ("a", "b", "c", "d") * 2]
    recovered = [("click[x]", "Invalid action!", False), ("search[shoes]", "results", True)]
    path, ids = scripted(writer(tmp_path), [(*TLE, loop), (*TLE, stalled), ("completed", True, recovered), (*TLE, loop)])
    async with viewer([path]) as base:
        _, page, _ = await get(base + "/failures")
        section = page[page.index("How episodes failed"):]
        body = re.search(r'data-table="behaviour">.*?<tbody>(.*?)</tbody>', section, re.S)
        assert body is not None
        row = _text(body.group(1))
        assert "alpha webshop" in row and "2 of 3 (67%) 1 of 3 (33%) 1 of 3 (33%)" in row  # looping, stalled, recovered
        assert "<script>" not in section and html.escape(HOSTILE_ACTION) in section
        links = {html.unescape(text): html.unescape(href) for href, text in re.findall(r'<a href="(/episode\?[^"]+)">([^<]+)</a>', body.group(1))}
        # one example of each kind, so a file with many loops still shows a recovery
        assert list(links) == [f"looping: {ids[0]}", f"stalled: {ids[1]}", f"recovered: {ids[2]}", f"unrecovered: {ids[0]}"]
        _, transcript, _ = await get(base + links[f"stalled: {ids[1]}"])
    text = _text(transcript)
    assert ids[1] in text and "task_limit_exceeded" in text and "answer d" in text
