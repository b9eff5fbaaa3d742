"""Whether the engine's limits or the server set a run's pace (issue 33): ``agentbench run`` says in one line when a
model's limiter (``max_in_flight``), the run's ``max_concurrency`` or an environment's capacity held back work a local
server would have taken, names the setting to raise, and says nothing when the server's own speed set the pace."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_support import mock_process, query

from agentbench_async.cli import main


def _run(capsys: pytest.CaptureFixture[str], tmp_path: Path, base_url: str, *args: str, env: str = "echo") -> list[str]:
    out = tmp_path / f"r{len(list(tmp_path.iterdir()))}.duckdb"
    code = main(["run", "--env", env, "--split", "dev", "--limit", "6", "--model", "mock-oracle", "--base-url", base_url,
                 "--task-header", "--no-progress", "--out", str(out), *args])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    assert query(out, "SELECT count(*) FROM episodes WHERE status = 'completed'") == [(6,)]
    return [line for line in err.splitlines() if "set the pace" in line or "set its pace" in line]


def test_the_summary_names_the_engine_s_limit_that_set_the_pace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with mock_process("--latency-ms", "300") as base_url:
        # six episodes at once, one request in flight: each request waits for the others' 300 ms in our limiter
        [line] = _run(capsys, tmp_path, base_url, "--max-in-flight", "1", "--max-concurrency", "6")
        assert line.startswith("mock-oracle: its requests waited ") and "in the engine's limiter" in line
        assert "its limits (max_in_flight 1), not the server's speed, set the pace" in line and "--max-in-flight" in line

        # one episode at a time: each waited for the one before it (two calls of 300 ms), ~3 s in all
        [line] = _run(capsys, tmp_path, base_url, "--max-concurrency", "1")
        assert line.startswith("max_concurrency 1 held episodes back: mock-oracle's echo episodes waited ")
        waited = line.split(" waited ")[1].split(" in all")[0]
        assert waited.endswith(" s") and 2.5 <= float(waited[:-2]) < 20, line
        assert "the engine's limit, not the server's speed, set the pace" in line and "--max-concurrency" in line

        # room for all: the server's latency set the pace, and nothing is said
        assert _run(capsys, tmp_path, base_url, "--max-in-flight", "64", "--max-concurrency", "64") == []

        # the environment's own capacity, smaller than max_concurrency, is named as the environment's
        [line] = _run(capsys, tmp_path, base_url, "--env-option", "mind2web.capacity=1", "--max-concurrency", "64", env="mind2web")
        assert line.startswith("mind2web's capacity (1 episodes at once in this process) held its episodes back: a model's "
                               "mind2web episodes waited up to "), line
