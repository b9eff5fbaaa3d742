"""The terminal: the report read at 80 columns and at full width, the demo's closing summary, CSV line endings, and
driving the built-in mock from the command line (no YAML)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from engine_support import mock_process
from rich.console import Console

from agentbench_async.analytics import load
from agentbench_async.analytics.commands import report

DEMO_ENVS = "db,kg,ltp,card_game,mind2web"


def _cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentbench_async.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": str(columns)}, timeout=300)  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A demo file (oracle and weak on five environments) and what `agentbench demo` printed on stdout."""
    out = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    proc = _cli("demo", "--out", str(out), "--env", DEMO_ENVS, "--limit", "3", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


def _report(path: Path, width: int) -> str:
    console = Console(width=width, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    report([path], html=None, json_out=False, console=console)
    return console.export_text()


def test_report_reads_at_80_columns(demo: tuple[Path, str]) -> None:
    text = _report(demo[0], 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    # every header is whole: short class names on purpose, with their legend, and the usual column names
    for header in ("model", "env", "score", "95% CI", "OA", "ok", "wrong", "CLE", "IF", "IA", "TLE", "cancel", "total",
                   "Completed", "episodes", "requests", "attempts", "retries", "p50", "p99", "HTTP", "calls/s"):  # fmt: skip
        assert re.search(rf"(^|\s){re.escape(header)}(\s|$)", text, re.M), header
    assert "CLE = context limit exceeded" in " ".join(text.split())
    assert not re.search(r"\b\w{1,3}…", text.split("Top failure reasons")[0]), "a header or number was cut"
    # model names and episode ids are never cut either
    for model in ("mock-oracle", "mock-weak"):
        assert model in text
    with load(demo[0]) as res:
        example = res.sql("SELECT min(episode_id) FROM episodes WHERE model = 'mock-weak' AND status <> 'completed'").item()
    assert example.split("/")[0] in text


def test_report_uses_the_full_width_when_there_is_more(demo: tuple[Path, str]) -> None:
    narrow, wide = _report(demo[0], 80), _report(demo[0], 220)
    assert max(len(line) for line in wide.splitlines()) > 120
    # a wide terminal gets one failure-class table with the full class names and shares
    assert "context limit" in wide and "(1/2)" not in wide and re.search(r"\d+ \(\d+%\)", wide)
    assert len(wide.splitlines()) < len(narrow.splitlines())


def test_demo_ends_with_a_short_summary_and_the_commands_to_see_more(demo: tuple[Path, str]) -> None:
    out, stdout = demo
    assert "Scores (%) per model and environment" in stdout and "OA" in stdout
    assert re.search(r"mock-weak: .*\d+ \(\d+%\)", stdout)  # its most common failure classes
    assert f"agentbench report {out}" in stdout and f"agentbench view {out}" in stdout
    assert "HTTP attempts per status" not in stdout  # the full report is one command away, not printed
    assert len(stdout.splitlines()) < 25
    # its table fits an 80-column terminal; piped, its text lines are whole lines, never broken at 80 (output.py)
    assert max(len(line) for line in stdout.splitlines() if line.startswith(("┏", "┃", "┡", "│", "└"))) <= 80
    # five of the eight environments: every OA says it is partial, and how many it averages (before: a bare number)
    oa_cells = re.findall(r"^│ mock-\w+ .*│ ([^│]*?) │$", stdout, re.M)
    assert oa_cells and all(re.fullmatch(r"\d+\.\d\d partial \(5/8\)", cell.strip()) for cell in oa_cells), oa_cells
    assert "partial OA: over the environments played only" in " ".join(stdout.split())


def test_demo_summary_reads_solved_games_as_solved_and_replies_as_the_model_s(demo: tuple[Path, str]) -> None:
    """The oracle solves every ltp game, which ltp ends at its round limit as upstream does: no failure of the oracle,
    the solved games noted with how they ended (the summary once said 'task limit exceeded' for them)."""
    out, stdout = demo
    flat = " ".join(stdout.split())
    assert "mock-oracle: none" in flat
    assert "mock-oracle · ltp: 3 solved episodes ended at the round limit, as AgentBench (status task_limit_exceeded)" in flat
    with load(out) as res:  # the engine marks mind2web's examples: what is not marked is exactly the model's replies
        mind2web = res.sql("SELECT count(*) FILTER (WHERE injected), count(*) FILTER (WHERE NOT injected) FROM turns "
                           "JOIN episodes USING (run_id, episode_id) WHERE env = 'mind2web' AND role = 'assistant'").row(0)
        replies = res.sql("SELECT sum(n_turns) FROM episodes WHERE env = 'mind2web'").item()
    assert mind2web[1] == replies and mind2web[0] > replies  # the examples, asked again each round, are marked


def test_sql_csv_has_unix_line_endings(demo: tuple[Path, str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "sql", str(demo[0]),
                           "SELECT model, count(*) AS n FROM episodes GROUP BY model ORDER BY model", "--format", "csv"],
                          capture_output=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert b"\r" not in proc.stdout
    assert proc.stdout.decode().splitlines() == ["model,n", f"mock-oracle,{5 * 3}", f"mock-weak,{5 * 3}"]


def test_sql_table_reads_at_80_columns(demo: tuple[Path, str]) -> None:
    """`agentbench sql FILE "SELECT * FROM env_scores"` (the README's example): a wide result is split into
    column groups that repeat the first column, nothing cut to 'mo…'."""
    proc = _cli("sql", str(demo[0]), "SELECT * FROM env_scores ORDER BY model, env")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    with load(demo[0]) as res:
        columns = res.sql("SELECT * FROM env_scores LIMIT 0").columns
    headers = " ".join(line for line in text.splitlines() if line.startswith("model "))
    assert all(re.search(rf"(^|\s){re.escape(c)}(\s|$)", headers) for c in columns), headers
    assert sum(line.startswith("model ") for line in text.splitlines()) >= 2  # split, the first column repeated


def test_run_drives_the_mock_from_the_command_line(tmp_path: Path) -> None:
    with mock_process() as url:
        statuses = {}
        for model in ("mock-oracle", "mock-weak"):
            out = tmp_path / f"{model}.duckdb"
            proc = _cli("run", "--model", model, "--base-url", url, "--task-header", "--env", "db", "--split", "dev",
                        "--limit", "4", "--no-progress", "--out", str(out))  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            with load(out) as res:
                statuses[model] = dict(res.sql("SELECT status, count(*) FROM episodes GROUP BY status").rows())
    # the task header made serve-mock play each model name's policy on each task
    assert statuses["mock-oracle"] == {"completed": 4}
    assert set(statuses["mock-weak"]) - {"completed"}, statuses
