"""The CLI: one-line errors for user mistakes, config-change refusal, resume, the mock path for both
wire formats and both action modes, and the history policy."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from engine_support import echo_config, mock_process, query, run, start_mock

from agentbench_async.cli import main
from agentbench_async.errors import StoreError
from agentbench_async.history import count_segments, history_policy


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentbench_async.cli", *args], capture_output=True, text=True, timeout=120)


def _one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("config", "needles"),
    [
        ("models: [gpt]\nenvs: echo\nout: x.duckdb\ntemprature: 0\n", ["unknown setting 'temprature'"]),
        ("models:\n  - name: gpt\n    rpm: lots\nenvs: echo\nout: x.duckdb\n", ["models[0].rpm", "positive integer"]),
        ("models:\n  - name: gpt\n    api_key: sk-abc\nenvs: echo\nout: x.duckdb\n", ["api_key_env"]),
        ("models: [gpt]\nenvs: [nope]\nout: x.duckdb\n", ["unknown environment 'nope'"]),
        ("models: [gpt]\nenvs: echo\nout: x.duckdb\nsplit: train\n", ["split 'train'"]),
        ("models: [gpt\nenvs: echo\n", ["not valid YAML"]),
        ("envs: echo\nout: x.duckdb\n", ["no model"]),
    ],
)
def test_bad_config_gives_one_line_error(tmp_path, config, needles):
    path = tmp_path / "bad.yaml"
    path.write_text(config)
    _one_line_error(_cli("run", "--config", str(path)), str(path), *needles)


def test_bad_flags_give_one_line_errors(tmp_path):
    _one_line_error(_cli("run", "--model", "m", "--env", "echo", "--out", str(tmp_path / "x.duckdb"), "--data-dir", str(tmp_path / "missing")), "--data-dir", "not a directory")
    _one_line_error(_cli("run", "--model", "m", "--env", "echo"), "--out")
    _one_line_error(_cli("run", "--model", "m", "--env", "echo", "--out", str(tmp_path / "x.duckdb"), "--api-key-env", "SURELY_UNSET_VAR_123"), "SURELY_UNSET_VAR_123 is not set")
    _one_line_error(_cli("sql", str(tmp_path / "missing.duckdb"), "SELECT 1"), "no such file")


async def test_changed_config_is_refused_unless_new_run(tmp_path):
    server = await start_mock()
    out = tmp_path / "r.duckdb"
    try:
        await run(echo_config(out, server.base_url, limit=2))
        changed = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "temperature": 0.7}], limit=2)
        with pytest.raises(StoreError, match="different run config.*--new-run"):
            await run(changed)
        changed.new_run = True
        summary = await run(changed)
        # limits and concurrency are not part of the config identity: this resumes the first config
        same = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "rpm": 1000}], limit=3, max_concurrency=7)
        resumed = await run(same)
    finally:
        await server.stop()
    assert summary.episodes == 2
    assert resumed.skipped == 2 and resumed.episodes == 1
    assert query(out, "SELECT count(DISTINCT fingerprint) FROM runs") == [(2,)]


async def test_refusal_names_the_run_wide_setting_that_changed(tmp_path):
    # e.g. a file written with the old default --history full, resumed with today's default
    server = await start_mock()
    out = tmp_path / "r.duckdb"
    try:
        await run(echo_config(out, server.base_url, limit=1, history="full"))
        with pytest.raises(StoreError, match=r"different run config \(history: full in the file, agentbench now\)"):
            await run(echo_config(out, server.base_url, limit=1))
    finally:
        await server.stop()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("action_mode", ["text", "tools"])
async def test_oracle_and_weak_through_http_for_both_wire_formats(tmp_path, provider, action_mode):
    server = await start_mock()
    out = tmp_path / "r.duckdb"
    try:
        models = [{"name": "mock-oracle", "provider": provider}, {"name": "mock-weak", "provider": provider}]
        summary = await run(echo_config(out, server.base_url, models=models, action_mode=action_mode))
    finally:
        await server.stop()
    rows = dict(((m, s), n) for m, s, n in query(out, "SELECT model, status, count(*) FROM episodes GROUP BY ALL"))
    assert rows[("mock-oracle", "completed")] == 20
    weak = {s for (m, s) in rows if m == "mock-weak"}
    assert {"completed", "invalid_format", "context_limit_exceeded"} <= weak
    assert summary.episodes == 40
    assert query(out, "SELECT count(*) FROM failure_summary WHERE model = 'mock-weak'")[0][0] == len(weak)
    if action_mode == "tools":
        assert query(out, "SELECT count(*) > 0 FROM turns WHERE tool_calls IS NOT NULL AND role = 'assistant'") == [(True,)]


def test_agentbench_history_policy_keeps_first_message_and_recent_tail():
    assert count_segments("hello world") == 2
    assert count_segments("internationalization") == 3  # 7 + 7 + 6 letters
    assert count_segments("a, b!") == 4
    long = "word " * 400  # 400 segments
    msgs = [{"role": "user", "content": "instructions"}]
    for _ in range(20):
        msgs.append({"role": "assistant", "content": long})
        msgs.append({"role": "user", "content": long})
    kept = history_policy("agentbench")(msgs)
    assert kept[0]["content"].startswith("instructions") and "[NOTICE]" in kept[0]["content"]
    assert kept[1]["role"] == "assistant", "the kept tail starts with the model's turn"
    assert kept[-1] is msgs[-1]
    assert sum(count_segments(m["content"]) for m in kept[1:]) < 3500
    assert history_policy("full")(msgs) is msgs


def test_envs_lists_the_environments_readably_at_80_columns(monkeypatch):
    from rich.console import Console

    from agentbench_async import cli
    from agentbench_async.envs import available_envs, make_env

    console = Console(width=80, record=True, color_system=None)
    monkeypatch.setattr(cli, "_console", console)
    assert main(["envs"]) == 0
    out = console.export_text()
    assert "…" not in out, "nothing is cut to fit 80 columns"
    assert max(len(line) for line in out.splitlines()) <= 80
    flat = " ".join(out.split())
    for name in available_envs():
        env = make_env(name)
        row = next(line for line in out.splitlines() if line.startswith(f"│ {name} "))
        assert f" {env.count('dev')} │" in row and f" {env.count('test')} │" in row, row
        assert f"{name}: {' '.join(env.description.split())}" in flat  # the long texts whole, as paragraphs
        assert f"needs: {' '.join(env.requires.split())}" in flat


def test_help_names_the_contract_commands():
    out = _cli("--help").stdout
    for cmd in ("run", "demo", "report", "sql", "envs", "serve-mock"):
        assert cmd in out
    run_help = _cli("run", "--help").stdout
    for flag in ("--config", "--model", "--provider", "--base-url", "--api-key-env", "--env", "--split", "--limit", "--repeats",
                 "--max-concurrency", "--rpm", "--tpm", "--max-retries", "--timeout", "--data-dir", "--out"):  # fmt: skip
        assert flag in run_help, flag


def test_cli_run_against_serve_mock_process(tmp_path):
    """The whole path as a user runs it: serve-mock in one process, agentbench run in another."""
    with mock_process() as base_url:
        cfg = {"out": str(tmp_path / "x.duckdb"), "envs": "echo", "split": "dev", "limit": 5,
               "models": [{"name": "mock-oracle", "base_url": base_url, "task_header": True}]}  # fmt: skip
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
        proc = _cli("run", "--config", str(tmp_path / "c.yaml"), "--no-progress")
        assert proc.returncode == 0, proc.stderr
        assert "5 episodes finished (completed 5)" in proc.stderr
        sql = _cli("sql", str(tmp_path / "x.duckdb"), "SELECT count(*) AS n FROM episodes WHERE success", "--format", "csv")
        assert sql.stdout.split() == ["n", "5"]
    assert Path(tmp_path / "x.duckdb").exists()


def test_judge_model_inherits_the_server_of_the_model_flags():
    from agentbench_async.cli import _parser, _run_settings

    args = _parser().parse_args(["run", "--model", "m", "--base-url", "http://127.0.0.1:8000/v1", "--api-key-env", "K",
                                 "--judge-model", "j", "--env", "ltp", "--out", "x.duckdb"])  # fmt: skip
    judge = _run_settings(args)["judge"]
    assert judge == {"name": "j", "base_url": "http://127.0.0.1:8000/v1", "api_key_env": "K"}
    args = _parser().parse_args(["run", "--model", "m", "--judge-model", "j", "--judge-base-url", "http://127.0.0.1:9/v1",
                                 "--env", "ltp", "--out", "x.duckdb"])  # fmt: skip
    assert _run_settings(args)["judge"] == {"name": "j", "base_url": "http://127.0.0.1:9/v1"}


def test_serve_mock_preload_loads_what_a_run_of_every_environment_plays(official_data_dir):
    """`serve-mock --preload SPLIT` loads every environment's task set before it listens (so a run's first requests
    do not queue behind task loading), and the same source the run picks: official where the data has it."""
    from agentbench_async.config import build_config
    from agentbench_async.envs import available_envs

    proc = subprocess.Popen([sys.executable, "-m", "agentbench_async.cli", "serve-mock", "--port", "0", "--preload", "dev",
                             "--data-dir", str(official_data_dir)], stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        said = []
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)
            if "serving at" in line:
                break
    finally:
        proc.terminate()
        proc.wait(10)
    text = " ".join("".join(said).split())
    sources = build_config({"out": "x.duckdb", "envs": "all", "split": "dev", "data_dir": str(official_data_dir),
                            "models": [{"name": "mock-oracle"}], "judge": "mock-judge"}).task_sources()  # fmt: skip
    assert list(sources) == available_envs()
    for env, line in sources.items():
        source = "official" if line.startswith("official") else "builtin"
        assert re.search(rf"preloaded {env}/dev: {source}, [1-9]\d* tasks", text), (env, line, text)
    assert "mock model serving at" in text
