"""The CLI items of issue 35: no traceback for `sql ... | head`, for an interval column in `sql`, or for serve-mock on a
busy port; failure reasons keep model names and hosts whole; --split std is test; environment names in any case,
an unknown one with the closest name; an option for an environment the run does not play refused; `envs --tasks ENV`
lists task ids and `--task-id`/`--task-ids FILE` play only those."""

from __future__ import annotations

import csv
import io
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from engine_support import app_in_thread, query

from agentbench_async.cli import main
from agentbench_async.mock.server import MockModelServer, MockOptions

RUN = ["run", "--task-header", "--no-progress", "--model", "mock-oracle"]


@pytest.fixture(scope="module")
def base_url() -> str:
    with app_in_thread(MockModelServer(MockOptions()).app) as port:
        yield f"http://127.0.0.1:{port}/v1"


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory, base_url: str) -> Path:
    out = tmp_path_factory.mktemp("played") / "echo.duckdb"
    assert main([*RUN, "--base-url", base_url, "--env", "echo", "--split", "dev", "--limit", "40", "--out", str(out)]) == 0
    return out


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_sql_into_a_pipe_closed_early_has_no_traceback(played):
    proc = subprocess.run(f"{sys.executable} -m agentbench_async.cli sql {played} 'SELECT * FROM model_calls, range(50)' "
                          "--format csv | head -1", shell=True, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.stdout.startswith("run_id,") and proc.stdout.count("\n") == 1
    assert proc.stderr == "", proc.stderr


def test_sql_with_an_interval_column_prints_it(capsys, played):
    code = main(["sql", str(played), "SELECT finished_at - started_at AS took, INTERVAL 3 MONTH AS m FROM episodes LIMIT 1",
                 "--format", "csv"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.splitlines()[0] == "took,m" and "90 days" in out.out.splitlines()[1]


def test_serve_mock_on_a_busy_port_is_one_line(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["serve-mock", "--port", str(port)])
    assert code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"cannot listen on 127.0.0.1:{port}" in line and "choose another --port" in line


def test_failure_reasons_keep_model_names_and_hosts_whole(capsys, tmp_path):
    out = tmp_path / "down.duckdb"
    code = main([*RUN[:-1], "gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1", "--env", "echo", "--split", "dev", "--limit", "2",
                 "--max-retries", "1", "--out", str(out)])  # fmt: skip
    assert code == 1, capsys.readouterr().err
    capsys.readouterr()
    assert main(["sql", str(out), "SELECT DISTINCT reason FROM failure_reasons", "--format", "csv"]) == 0
    reason = list(csv.reader(io.StringIO(capsys.readouterr().out)))[1][0]
    assert reason.startswith("gpt-4o-mini: nothing answers at http://127.0.0.1:9/v1") and "127.0.0.1:9" in reason, reason


def test_split_std_is_the_test_split(capsys, tmp_path, base_url):
    out = tmp_path / "std.duckdb"
    assert main([*RUN, "--base-url", base_url, "--env", "echo", "--split", "std", "--limit", "1", "--out", str(out)]) == 0
    assert query(out, "SELECT DISTINCT split FROM episodes") == [("test",)]


def test_environment_names_in_any_case_and_the_closest_name_for_an_unknown_one(capsys, tmp_path, base_url):
    out = tmp_path / "case.duckdb"
    assert main([*RUN, "--base-url", base_url, "--env", "ECHO", "--split", "dev", "--limit", "1", "--out", str(out)]) == 0
    assert query(out, "SELECT DISTINCT env FROM episodes") == [("echo",)]
    capsys.readouterr()
    code = main([*RUN, "--base-url", base_url, "--env", "cardgame", "--out", str(tmp_path / "no.duckdb")])
    assert code == 2 and _one_error_line(capsys.readouterr().err).endswith("did you mean card_game?")


@pytest.mark.parametrize("flag", [["--env-option", "db.port=3307"], ["--kg-endpoint", "http://127.0.0.1:8890/sparql"]])
def test_an_option_for_an_environment_not_in_the_run_is_refused(capsys, tmp_path, base_url, flag):
    out = tmp_path / "opt.duckdb"
    code = main([*RUN, "--base-url", base_url, "--env", "echo", "--split", "dev", *flag, "--out", str(out)])
    assert code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "is not one of this run's environments (echo); add it to --env or drop the option" in line and flag[0] in line
    assert not out.exists()


def test_envs_lists_task_ids_and_a_run_plays_only_those_chosen(capsys, tmp_path, base_url):
    assert main(["envs", "--tasks", "echo", "--split", "dev"]) == 0
    ids = capsys.readouterr().out.split()
    assert len(ids) > 10 and len(set(ids)) == len(ids)
    chosen = tmp_path / "ids.txt"
    chosen.write_text(f"# two of them\n{ids[3]}\n\n{ids[7]}  # this one too\n", encoding="utf-8")
    out = tmp_path / "picked.duckdb"
    code = main([*RUN, "--base-url", base_url, "--env", "echo", "--split", "dev", "--task-ids", str(chosen), "--task-id", ids[5],
                 "--out", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert query(out, "SELECT task_id FROM episodes ORDER BY task_id") == [(ids[3],), (ids[5],), (ids[7],)]
    capsys.readouterr()
    code = main([*RUN, "--base-url", base_url, "--env", "echo", "--split", "dev", "--task-id", "no-such-task",
                 "--out", str(tmp_path / "none.duckdb")])  # fmt: skip
    assert code == 2
    assert "task id 'no-such-task' is not a task of the dev split of echo" in _one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "none.duckdb").exists()
