"""Everyday use without surprises (issue 43, item 4): each of these was a traceback, a wrong exit code, a minute of
retries or output broken at 80 columns; each is now one line (or an unbroken one) and the right exit code."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from agentbench_async.analytics.compare import p_is, p_text
from agentbench_async.cli import main
from agentbench_async.store.db import Store

REPO = Path(__file__).resolve().parents[2]
GUESS = REPO / "docs" / "examples" / "guess_number.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentbench_async.cli", *args], capture_output=True, text=True, timeout=300, env=env)


def test_nothing_listening_at_the_base_url_ends_the_run_at_once_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there: every connection is refused
    started = time.monotonic()
    code = main(["run", "--env", str(GUESS), "--model", "m", "--base-url", url, "--out", str(tmp_path / "r.duckdb"), "--no-progress"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 1 and elapsed < 5, (code, elapsed, err)
    first = err.splitlines()[0]
    assert first.startswith(f"error: m: nothing answers at {url}/chat/completions (ClientConnectorError") and "fix base_url" in first
    assert "retry" not in first and "giving up after" not in err  # no retries of a server that never answered


def test_argparse_mistakes_are_one_line_with_the_commands_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, needle in ((["run", "--limit", "x"], "agentbench run: error: argument --limit: invalid int value: 'x' (see agentbench run --help)"),
                         (["run", "--bogus"], "agentbench run: error: unrecognized arguments: --bogus (see agentbench run --help)"),
                         (["frob"], "agentbench: error: argument COMMAND: invalid choice: 'frob'")):  # fmt: skip
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith(needle), err


def test_sql_refuses_a_statement_that_writes_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo.duckdb"
    assert main(["demo", "--env", str(GUESS), "--out", str(out), "--limit", "2", "--no-progress"]) == 0
    capsys.readouterr()
    for query, kind in (("DELETE FROM episodes", "DELETE"), ("CREATE TABLE t (x INT)", "CREATE"), ("DROP VIEW env_scores", "DROP"),
                        ("COPY episodes TO 'x.csv'", "COPY"), ("SELECT 1; DELETE FROM episodes", "DELETE")):  # fmt: skip
        assert main(["sql", str(out), query]) == 2
        err = capsys.readouterr().err
        assert err == f"error: sql is read-only: a {kind} statement changes data; give a SELECT (SHOW TABLES lists what there is to read)\n"
    assert main(["sql", str(out), "SELECT count(*) AS n FROM episodes", "--format", "csv"]) == 0
    assert capsys.readouterr().out == "n\n4\n"


def test_p_values_are_printed_as_p_below_a_ten_thousandth() -> None:
    assert (p_is(1e-9), p_text(1e-9), p_is(0.25), p_text(0.25)) == ("p < 0.0001", "< 0.0001", "p = 0.2500", "0.2500")


def test_output_that_is_not_a_terminal_is_never_broken_at_80_columns(tmp_path: Path) -> None:
    out = tmp_path / "demo.duckdb"
    demo = _cli("demo", "--env", str(GUESS), "--out", str(out), "--no-progress")
    assert demo.returncode == 0, demo.stderr
    # the end-of-run lines and the commands to copy are whole lines, each longer than 80 characters
    assert any(len(line) > 80 and line.startswith("See more:") for line in demo.stdout.splitlines()), demo.stdout
    report = _cli("report", str(out))
    lines = report.stdout.splitlines()
    assert report.returncode == 0 and max(len(line) for line in lines) > 80
    # the behaviour note is one line, not three
    assert any(line.startswith("looping = a failed episode") and line.rstrip().endswith("view.") for line in lines), report.stdout
    # COLUMNS sets the width of tables (documented in docs/usage.md)
    narrow = _cli("report", str(out), env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"})
    assert narrow.returncode == 0 and max(len(line) for line in narrow.stdout.splitlines() if line.startswith(("┏", "│"))) <= 100


def test_an_out_path_that_cannot_be_written_is_not_blamed_on_another_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "x.duckdb"
    folder.mkdir()  # a folder where the file should be: DuckDB cannot open it, and nobody holds it
    assert main(["run", "--env", str(GUESS), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give an --out path you can write" in err and "another agentbench process" not in err, err


def test_a_second_ctrl_c_during_the_final_checkpoint_is_an_interrupt_not_a_traceback(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    real = store.con

    class Interrupted:  # DuckDB's answer to a Ctrl-C that arrives while it checkpoints
        def execute(self, sql: str, *args: object) -> object:
            if sql == "CHECKPOINT":
                raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")
            return real.execute(sql, *args)

        def close(self) -> None:
            real.close()

    store.con = Interrupted()  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        store.close()  # the command line turns it into "interrupted: ..." and exit 130


def test_the_pace_line_says_when_the_environment_not_the_model_took_the_time() -> None:
    from agentbench_async.models import ModelConfig
    from agentbench_async.pace import PaceTally
    from agentbench_async.records import CallRow

    def call(ms: float) -> CallRow:
        return CallRow(turn=1, attempt=1, http_status=200, latency_ms=ms, caller="agent", model="m")

    slow_sandbox, slow_model = PaceTally(), PaceTally()
    for tally, env, model_ms in ((slow_sandbox, "os", 10_000.0), (slow_model, "db", 90_000.0)):
        tally.admitted("m", env, 30.0)
        tally.add_calls([call(model_ms)])
        tally.add_episode(env, 100.0, [call(model_ms)])  # 100 s of episodes: 10 s (os) or 90 s (db) of it the model's
    [line] = slow_sandbox.lines([ModelConfig(name="m")], None, 4)
    assert "os's episodes spent 1m30s of their 1m40s in the environment's own steps, not waiting for the model" in line
    [line] = slow_model.lines([ModelConfig(name="m")], None, 4)
    assert "environment's own steps" not in line and line.startswith("max_concurrency 4 held episodes back")


@pytest.mark.parametrize("where", ["file", "proc"])
def test_run_out_and_report_html_where_nothing_can_be_written_are_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:  # fmt: skip
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    base = blocker if where == "file" else Path("/proc/agentbench-nowhere")  # a file as the folder; a folder /proc refuses
    code = main(["run", "--env", str(GUESS), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(base / "x.duckdb")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and "give a path you can write" in err, err
    out = tmp_path / "demo.duckdb"
    assert main(["demo", "--env", str(GUESS), "--out", str(out), "--limit", "1", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--html", str(base / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "give a path you can write" in err, err


async def test_a_server_that_answered_and_went_away_is_an_outage_retried_not_a_stop() -> None:
    from engine_support import start_mock

    from agentbench_async.errors import ModelError
    from agentbench_async.models import ModelConfig, open_client

    server = await start_mock()
    config = ModelConfig(name="mock-oracle", base_url=server.base_url, max_retries=2, retry_backoff_s=0.01, retry_backoff_max_s=0.02)
    sessions: list = []
    client = open_client(config, sessions)
    try:
        calls: list = []
        await client.complete([{"role": "user", "content": "hi"}], None, calls=calls, turn=1)  # answered: the server is there
        await server.stop()  # ... and goes away, a while later (not the backpressure of a server just answering: limits.py)
        client.limits.answered_at -= 3600
        calls = []
        with pytest.raises(ModelError) as failed:
            await client.complete([{"role": "user", "content": "hi"}], None, calls=calls, turn=2)
        assert len(calls) == 3 and "giving up after 3 attempts" in str(failed.value)  # retried as an outage
        assert not failed.value.fatal and "nothing answers" not in str(failed.value)
    finally:
        for session in sessions:
            await session.close()


def test_a_server_too_loaded_to_accept_before_its_first_answer_is_retried_not_called_absent(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    # a listening server whose accept queue is full (it never accepts): new connections time out (sock_connect, 5 s) instead
    # of being refused. That is a loaded server, not a wrong address: the calls are retried as usual, and the run does
    # not say that nothing answers there
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(4):  # more than the queue holds (backlog 0 holds one): the rest wait in SYN retransmission
        c = socket.socket()
        c.setblocking(False)
        c.connect_ex(("127.0.0.1", port))
        fillers.append(c)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        code = main(["run", "--env", str(GUESS), "--model", "m", "--base-url", url, "--timeout", "6", "--max-retries", "1",
                     "--infra-retries", "0", "--limit", "1", "--out", str(tmp_path / "r.duckdb"), "--no-progress"])  # fmt: skip
        err = capsys.readouterr().err
    finally:
        for c in fillers:
            c.close()
        server.close()
    assert "nothing answers" not in err, err
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as con:
        attempts = con.execute("SELECT count(*), count(*) FILTER (WHERE error ILIKE '%timeout%') FROM model_calls").fetchone()
    assert attempts is not None and attempts[0] == 2 and attempts[1] == 2, (attempts, err)  # the first try and its retry
    assert code != 0
