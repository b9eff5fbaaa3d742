"""An environment in one Python file (issue 43): ``--env ./guess_number.py`` runs it without a package, its mistakes are
one line with file and line when it is loaded, and its code is part of what a run resumes against."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from engine_support import mock_process, query

from agentbench_async.cli import main
from agentbench_async.envs import make_env
from agentbench_async.envs.files import load_env_file
from agentbench_async.errors import ConfigError
from agentbench_async.testing import play

REPO = Path(__file__).resolve().parents[2]
GUESS = REPO / "docs" / "examples" / "guess_number.py"


def _file(tmp_path: Path, text: str, name: str = "env.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_the_guess_number_example_is_one_short_file_and_runs_with_run_env_file(tmp_path: Path) -> None:
    assert len(GUESS.read_text().splitlines()) <= 50
    out = tmp_path / "guess.duckdb"
    with mock_process("--env", str(GUESS)) as base_url:
        proc = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "run", "--env", str(GUESS), "--model", "mock-oracle",
                               "--base-url", base_url, "--task-header", "--out", str(out), "--no-progress"],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = query(out, "SELECT env, count(*), count(*) FILTER (WHERE success), max(n_turns) FROM episodes GROUP BY env")
    assert rows == [("guess_number", 20, 20, 7)], rows  # a binary search needs at most 7 guesses
    report = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "report", str(out)], capture_output=True, text=True,
                            timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert "success rate" in report.stdout and "mean score" not in report.stdout
    assert "not the paper's tasks" not in report.stdout and "AgentBench paper convention" not in report.stdout
    assert "Overall AgentBench score" not in report.stdout


def test_the_weak_player_loses_most_games_and_the_oracle_wins_all() -> None:
    env = make_env(load_env_file(GUESS).cls.name)

    async def scores(policy: str) -> list[float]:
        return [(await play(env, task, policy)).score for task in env.tasks("test")]

    assert asyncio.run(scores("oracle")) == [1.0] * 20
    weak = asyncio.run(scores("weak"))
    assert 0 < sum(weak) < 20  # it wins where the number is at most 7


@pytest.mark.parametrize(("source", "message"), [
    ("""
     from agentbench_async.environment import Environment, Outcome, Session, Step

     class Guess(Session):
         async def begin(self):
             return [{"role": "user", "content": "go"}]

         async def step(self, reply):
             return Step(action="x")

         def on_turn_limit(self):
             return Outcome("task_limit_exceeded")

     class Env(Environment):
         name = "sync_limit"
         max_turns = 2

         def tasks(self, split):
             return iter([])

         async def open_session(self, task, ctx):
             return Guess()
     """, r"env\.py:11: Guess\.on_turn_limit must be async \(async def on_turn_limit\(\.\.\.\)\): the engine awaits it$"),
    ("""
     from agentbench_async.environment import Environment, Session

     class Half(Session):
         async def begin(self):
             return []

     class Env(Environment):
         name = "half"
         max_turns = 2

         def tasks(self, split):
             return iter([])

         async def open_session(self, task, ctx):
             return Half()
     """, r"env\.py:4: session class Half lacks step: define async def step\(\.\.\.\)$"),
    ("""
     from agentbench_async.environment import Environment, Session

     class Words(Session):
         async def begin(self):
             return []

         async def step(self, reply) -> str:
             return "ok"

     class Env(Environment):
         name = "words"
         max_turns = 2

         def tasks(self, split):
             return iter([])

         async def open_session(self, task, ctx):
             return Words()
     """, r"env\.py:8: Words\.step is declared to return str; the engine expects a Step$"),
    ("""
     TASKS = [{"prompt": "say hi"}]

     def step(task, state, reply):
         return None
     """, r"env\.py: no score\(\); define def score\(task, state\):"),
    ("""
     TASKS = [{"prompt": "say hi"}]

     def step(task, reply):
         return None

     def score(task, state):
         return 1.0
     """, r"env\.py:4: step\(\) must take 3 arguments \(task, state, reply\)$"),
    ("""
     TASKS = [{"prompt": "say hi"}]

     def step(task, state, reply):
         return None

     def score(task, state) -> str:
         return "yes"
     """, r"env\.py:7: score\(\) is declared to return str; the engine expects a number"),
    ("TASKS = [\n\ndef step(:\n", r"env\.py:\d: SyntaxError: "),
    ("import a_module_nobody_installed\n", r"env\.py:1: ModuleNotFoundError: No module named 'a_module_nobody_installed'$"),
    ("NAME = 'os'\nTASKS = []\ndef step(task, state, reply):\n    return None\ndef score(task, state):\n    return 0\n",
     r"environment name 'os' is taken by a built-in environment"),
])  # fmt: skip
def test_mistakes_are_one_line_with_file_and_line_at_load(tmp_path: Path, source: str, message: str) -> None:
    path = _file(tmp_path, source)
    with pytest.raises(ConfigError, match=message):
        load_env_file(path)


def test_a_run_of_a_file_with_a_mistake_exits_2_with_that_line_and_no_result_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, "TASKS = [{'prompt': 'hi'}]\n\ndef step(task, state, reply):\n    return None\n")
    out = tmp_path / "r.duckdb"
    assert main(["run", "--env", str(path), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no score()" in err and not out.exists()


def test_a_wrong_return_value_at_run_time_names_the_function(tmp_path: Path) -> None:
    path = _file(tmp_path, """
    NAME = "returns_a_number"
    TASKS = [{"prompt": "hi"}]

    def step(task, state, reply):
        return 42

    def score(task, state):
        return 1.0

    def oracle(task, messages):
        return "hello"
    """)
    env = make_env(load_env_file(path).cls.name)
    record = asyncio.run(play(env, next(env.tasks("test"))))
    assert record.status == "env_error"
    assert record.error is not None and "env.py:5: step returned int" in record.error


def test_an_edited_file_is_played_again_by_demo_which_says_why_and_a_worker_refuses_a_changed_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    path = tmp_path / "guess.py"
    path.write_text(GUESS.read_text().replace('NAME = "guess_number"', 'NAME = "guess_edit"'))
    out = tmp_path / "demo.duckdb"
    args = ["demo", "--env", str(path), "--out", str(out), "--limit", "3", "--no-progress"]
    assert main(args) == 0
    assert "demo: 6 episodes finished, 0 already done" in capsys.readouterr().err
    assert main(args) == 0
    assert "demo: 0 episodes finished, 6 already done" in capsys.readouterr().err
    old_code = query(out, "SELECT DISTINCT json_extract_string(config, '$.env_options.guess_edit.code') FROM runs")[0][0]
    path.write_text(path.read_text().replace("MAX_TURNS = 7", "MAX_TURNS = 6"))
    assert main(args) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"demo: guess_edit.code: {old_code} in the file, sha256:" in err and "playing again" in err
    assert "demo: 6 episodes finished, 0 already done" in err
    # a run with the same --out is refused, naming the code that changed
    with pytest.raises(ConfigError, match=r"changed since the run started"):
        make_env("guess_edit", options={"env_file": str(path), "code": old_code})


def test_the_environment_turns_the_stall_heuristic_off_and_the_report_follows_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo.duckdb"
    assert main(["demo", "--env", str(GUESS), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    # the weak player hears "Higher." turn after turn: news in this game, so no episode is called stalled
    rows = query(out, "SELECT behaviour, count(*) FROM episode_behaviour WHERE model = 'mock-weak' GROUP BY ALL")
    assert dict(rows).get("stalled") is None and sum(n for _, n in rows) == 20, rows
    assert query(out, "SELECT metric FROM env_scores")[0] == ("success rate",)
    assert query(out, "SELECT count(*) FROM overall_score") == [(0,)]


def test_demo_says_which_mock_players_a_file_lacks_and_fails_when_every_episode_is_an_env_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    bare = _file(tmp_path, "NAME = 'bare'\nTASKS = [{'prompt': 'hi'}]\ndef step(task, state, reply):\n    return None\n"
                           "def score(task, state):\n    return 0.0\n", "bare.py")  # fmt: skip
    assert main(["demo", "--env", str(bare), "--out", str(tmp_path / "bare.duckdb"), "--no-progress"]) == 0
    assert "demo: bare has no mock player oracle or weak: those episodes get a reply that fails them" in capsys.readouterr().err
    buggy = _file(tmp_path, "NAME = 'buggy'\nTASKS = [{'prompt': 'hi'}]\ndef step(task, state, reply):\n    return state['gone']\n"
                            "def score(task, state):\n    return 0.0\ndef oracle(task, messages):\n    return 'hi'\nweak = oracle\n",
                  "buggy.py")  # fmt: skip
    out = tmp_path / "buggy.duckdb"
    assert main(["demo", "--env", str(buggy), "--out", str(out), "--no-progress"]) == 1
    assert "demo: every episode of mock-oracle, mock-weak failed for infrastructure reasons" in capsys.readouterr().err
    assert query(out, "SELECT DISTINCT error FROM episodes") == [(f"KeyError: 'gone' (at {buggy}:4)",)]  # the line it came from


def test_an_empty_env_list_is_refused_rather_than_taken_for_every_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--env", "", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "e.duckdb")]) == 2
    assert capsys.readouterr().err == "error: flags: --env is empty; name environments (agentbench envs lists them), a FILE.py, or all\n"


def test_two_workers_load_the_file_the_run_stored(tmp_path: Path) -> None:
    from support import require

    require(subprocess.run([sys.executable, "-c", "import ray"], capture_output=True).returncode == 0, "Ray is not installed (pip install '.[ray]')")
    import os
    import signal

    out = tmp_path / "w.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    with mock_process("--env", str(GUESS)) as base_url:
        proc = subprocess.Popen([sys.executable, "-m", "agentbench_async.cli", "run", "--env", str(GUESS), "--model", "mock-oracle",
                                 "--base-url", base_url, "--task-header", "--out", str(out), "--workers", "2", "--no-progress"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)  # fmt: skip
        try:
            _, err = proc.communicate(timeout=300)
        finally:  # the driver and its Ray instance never outlive the test
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    assert proc.returncode == 0, err
    assert "ray: 2 workers on 1 node" in err
    assert query(out, "SELECT count(*), count(*) FILTER (WHERE success) FROM episodes") == [(20, 20)]
