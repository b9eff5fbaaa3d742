"""Environment text inside a reply's observation is marked as the environment's (issue 36): an observation that
carries set-up text with the answer (mind2web's few-shot examples before each round's page, card_game's rules and
earlier exchanges re-sent before each prompt) keeps only the environment's answer and says in one bracketed line how
many set-up messages came with it; the transcript has those as the environment's injected turns. In ``show``, the
viewer and its static export alike: no few-shot answer ever reads as the model's."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from engine_support import query, run, start_mock

from agentbench_async.config import build_config
from agentbench_async.view.export import export

MARK = "set-up messages of the environment (rules, examples, earlier exchanges): in the transcript as its injected turns"


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("marks") / "r.duckdb"

    async def play() -> None:
        server = await start_mock()
        cfg = build_config({"out": out, "envs": ["mind2web", "card_game"], "split": "dev", "limit": 1,
                            "models": [{"name": "mock-weak", "base_url": server.base_url, "task_header": True}]}, where="test")  # fmt: skip
        try:
            await run(cfg)
        finally:
            await server.stop()

    asyncio.run(play())
    return out


def _replies(out: Path, env: str) -> list[tuple[str, str]]:
    return query(out, "SELECT t.episode_id, t.observation FROM turns t JOIN episodes e USING (run_id, episode_id) "
                      f"WHERE e.env = '{env}' AND t.role = 'assistant' AND NOT t.injected AND t.observation IS NOT NULL ORDER BY t.seq")  # fmt: skip


@pytest.mark.parametrize("env", ["mind2web", "card_game"])
def test_an_observation_holds_the_environment_s_answer_and_marks_the_set_up_text(played: Path, env: str) -> None:
    replies = _replies(played, env)
    assert replies, f"no {env} reply with an observation"
    examples = {c for (c,) in query(played, "SELECT t.content FROM turns t JOIN episodes e USING (run_id, episode_id) "
                                            f"WHERE e.env = '{env}' AND t.role = 'assistant' AND t.injected AND t.turn >= 1")}  # fmt: skip
    assert examples, "the set-up text is in the transcript as injected turns"
    for _, observation in replies:
        assert observation.startswith("[with ") and MARK in observation.splitlines()[0], observation[:300]
        assert not any(example and example in observation for example in examples)  # before: every few-shot answer in it


def test_show_and_the_exported_transcript_carry_the_mark(played: Path, tmp_path: Path) -> None:
    episode = _replies(played, "mind2web")[0][0]
    shown = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "show", str(played), episode], capture_output=True,
                           text=True, timeout=120, env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "set-up messages of the environment" in " ".join(shown.stdout.split())
    site = tmp_path / "site"
    export([played], site)
    pages = [p.read_text() for p in site.rglob("*.html")]
    assert any("set-up messages of the environment" in page for page in pages)
