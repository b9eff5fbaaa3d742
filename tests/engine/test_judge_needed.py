"""ltp needs a judge (issue 35): a run with ltp and no judge is refused at start in one line naming --judge-model
(nothing written); the judge counts only for ltp's results (a judge given to a run without ltp changes nothing, a
resume of ltp with another judge is refused naming the judge). Through the CLI against the loopback mock."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_support import app_in_thread, query

from agentbench_async.cli import main
from agentbench_async.mock.server import MockModelServer, MockOptions

RUN = ["run", "--task-header", "--split", "dev", "--no-progress", "--model", "mock-oracle", "--limit", "2"]


def _run(capsys: pytest.CaptureFixture[str], base_url: str, out: Path, *args: str) -> tuple[int, str]:
    code = main([*RUN, "--base-url", base_url, "--out", str(out), *args])
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def base_url() -> str:
    with app_in_thread(MockModelServer(MockOptions()).app) as port:
        yield f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("envs", ["ltp", "echo,ltp", "all"])
def test_ltp_without_a_judge_is_refused_at_start(capsys, tmp_path, base_url, envs):
    out = tmp_path / "no-judge.duckdb"
    code, err = _run(capsys, base_url, out, "--env", envs)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "ltp needs a judge model to host its games: give --judge-model NAME" in lines[0], err
    assert not out.exists()


def test_a_judge_changes_nothing_for_environments_it_takes_no_part_in(capsys, tmp_path, base_url):
    out = tmp_path / "echo.duckdb"
    code, err = _run(capsys, base_url, out, "--env", "echo", "--judge-model", "mock-judge")
    assert code == 0, err
    code, err = _run(capsys, base_url, out, "--env", "echo", "--judge-model", "another-judge")
    assert code == 0, err
    assert "0 episodes finished" in err and "2 already done" in err, "resumed: echo's results do not depend on the judge"
    code, err = _run(capsys, base_url, out, "--env", "echo")
    assert code == 0 and "2 already done" in err, err
    assert query(out, "SELECT count(DISTINCT fingerprint) FROM episodes") == [(1,)]


def test_ltp_resumed_with_another_judge_is_refused_naming_the_judge(capsys, tmp_path, base_url):
    out = tmp_path / "ltp.duckdb"
    code, err = _run(capsys, base_url, out, "--env", "ltp", "--judge-model", "mock-judge")
    assert code == 0, err
    assert query(out, "SELECT count(*) FROM episodes WHERE env = 'ltp' AND status NOT IN ('env_error', 'model_error')") == [(2,)]
    code, err = _run(capsys, base_url, out, "--env", "ltp", "--judge-model", "another-judge")
    assert code == 2, err
    assert "judge: mock-judge in the file, another-judge now" in err, err
