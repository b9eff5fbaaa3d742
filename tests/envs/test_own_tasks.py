"""Task files of the user's own for the built-in environments (``--tasks ENV=PATH``, ``tasks:``; issue 31): read in
AgentBench's own format, played instead of the built-in tasks through the mock model, their sha256 stored and the
run labelled as not the paper's tasks; a bad file is one line naming the file, the record and the field."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import openpyxl
import pytest
from engine_support import query, run
from support import require

from agentbench_async.config import build_config
from agentbench_async.errors import AgentBenchError, ConfigError
from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.resources import environments_dir


def _kg_file(tmp_path: Path, count: int = 3) -> Path:
    records = json.loads((environments_dir() / "kg" / "dev.json").read_text())[:count]
    path = tmp_path / "my_kg.json"
    path.write_text(json.dumps(records, indent=1))
    return path


def _ltp_workbook(tmp_path: Path, rows: list[tuple[str, str, str, str]]) -> Path:
    """A workbook laid out as AgentBench's LTP files: a header row, then story | answer | story keys | answer keys."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(("story", "answer", "Story keys", "Answer keys"))
    for row in rows:
        sheet.append(row)
    path = tmp_path / "my_ltp.xlsx"
    book.save(path)
    return path


def _ltp_rows(count: int) -> list[tuple[str, str, str, str]]:
    records = [json.loads(line) for line in (environments_dir() / "ltp" / "dev.jsonl").read_text().splitlines()[:count]]
    return [(r["story"], r["truth"], "\n".join(f"{i + 1}. {k}" for i, k in enumerate(r["story_keys"])),
             "\n".join(f"{i + 1}. {k}" for i, k in enumerate(r["answer_keys"]))) for r in records]  # fmt: skip


def _config(tmp_path: Path, base_url: str, tasks: dict[str, str], **more: object):  # noqa: ANN202 - RunConfig
    raw = {"out": tmp_path / "own.duckdb", "envs": list(tasks), "split": "test", "tasks": tasks,
           "models": [{"name": f"mock-{p}", "base_url": base_url, "task_header": True} for p in ("oracle", "weak")],
           "judge": {"name": "mock-judge", "base_url": base_url, "task_header": True}, **more}  # fmt: skip
    return build_config(raw, where="test")


async def test_own_kg_ltp_and_db_files_are_played_recorded_with_their_sha256_and_labelled(tmp_path: Path) -> None:
    require(shutil.which("mariadbd") is not None or Path("/usr/sbin/mariadbd").exists(), "MariaDB is not installed (db)")
    kg, ltp, db = _kg_file(tmp_path), _ltp_workbook(tmp_path, _ltp_rows(2)), tmp_path / "my_db.jsonl"
    db.write_text("\n".join((environments_dir() / "db" / "dev.jsonl").read_text().splitlines()[:2]) + "\n")
    tasks = {"kg": str(kg), "ltp": str(ltp), "db": str(db)}
    server = MockModelServer(MockOptions(env_options={env: {"tasks_file": path} for env, path in tasks.items()}))
    base_url = await server.start()
    try:
        cfg = _config(tmp_path, base_url, tasks)
        assert cfg.task_sources()["kg"] == f"your own tasks from {kg} (sha256 {hashlib.sha256(kg.read_bytes()).hexdigest()}): not the paper's"
        summary = await run(cfg)
        assert summary.episodes == 14
        out = tmp_path / "own.duckdb"
        rows = query(out, "SELECT env, model, source, count(*), avg(score) FROM episodes GROUP BY ALL ORDER BY ALL")
        assert [(env, model, source, n) for env, model, source, n, _ in rows] == [
            ("db", "mock-oracle", "custom", 2), ("db", "mock-weak", "custom", 2),
            ("kg", "mock-oracle", "custom", 3), ("kg", "mock-weak", "custom", 3),
            ("ltp", "mock-oracle", "custom", 2), ("ltp", "mock-weak", "custom", 2),
        ]  # fmt: skip
        scores = {(env, model): score for env, model, _, _, score in rows}
        assert scores[("kg", "mock-oracle")] == scores[("ltp", "mock-oracle")] == scores[("db", "mock-oracle")] == 1.0
        stored = json.loads(query(out, "SELECT config FROM runs")[0][0])
        for env, path in (("kg", kg), ("ltp", ltp)):
            assert stored["env_options"][env] == {"tasks_file": str(path), "tasks_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        deviations = {d["setting"]: d for d in stored["agentbench_deviations"]}
        assert deviations["kg.tasks"]["value"] == f"{kg} (sha256 {hashlib.sha256(kg.read_bytes()).hexdigest()})"
        assert deviations["kg.tasks"]["envs"] == ["kg"] and "data" not in deviations  # not also "built-in task suites"
        report = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "report", str(out)], capture_output=True, text=True)
        assert report.returncode == 0, report.stderr
        assert "your own tasks, not the paper's" in " ".join(report.stdout.split())
        # not AgentBench's tasks: no overall AgentBench score, no paper-convention table (issue 43)
        assert "Overall AgentBench score" not in report.stdout and "AgentBench paper convention" not in report.stdout
        assert query(out, "SELECT count(*) FROM overall_score") == [(0,)]
        # the same file resumes; a changed one is another run's tasks
        assert (await run(_config(tmp_path, base_url, tasks))).skipped == 14
        kg.write_text(kg.read_text().replace("frostvik", "Frostvik"))
        with pytest.raises(AgentBenchError, match=r"holds results of a different run config \(kg.tasks_sha256: "):
            await run(_config(tmp_path, base_url, tasks))
    finally:
        await server.stop()


def _os_bad(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "os.json"
    path.write_text(json.dumps([{"description": "ok", "evaluation": {"match": "1"}}, {"description": "x", "evaluation": {}}]))
    return path, f"os: {path} record 1: 'evaluation' needs 'match' or 'check'"


def _db_bad(tmp_path: Path) -> tuple[Path, str]:
    good = (environments_dir() / "db" / "dev.jsonl").read_text().splitlines()[0]
    record = json.loads(good)
    del record["table"]
    path = tmp_path / "db.jsonl"
    path.write_text(good + "\n" + json.dumps(record) + "\n")
    return path, f"db: {path}:2: missing field 'table' (see docs/envs/db.md for the record format)"


def _kg_bad(tmp_path: Path) -> tuple[Path, str]:
    path = _kg_file(tmp_path)
    records = json.loads(path.read_text())
    records[2]["entities"] = ["m.0r4hnx"]
    path.write_text(json.dumps(records))
    return path, f"{path}: record 2: 'entities' must map surface names to Freebase ids"


def _ltp_bad(tmp_path: Path) -> tuple[Path, str]:
    rows = _ltp_rows(2)
    rows[1] = (rows[1][0], "", rows[1][2], rows[1][3])
    path = _ltp_workbook(tmp_path, rows)
    return path, f"ltp: {path} row 3: column 'truth' is empty; every puzzle needs story, answer, story keys and answer keys"


@pytest.mark.parametrize("env, bad", [("os", _os_bad), ("db", _db_bad), ("kg", _kg_bad), ("ltp", _ltp_bad)])
def test_a_bad_record_is_one_line_naming_file_record_and_field_before_the_run_starts(tmp_path: Path, env: str, bad) -> None:  # noqa: ANN001
    path, message = bad(tmp_path)
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, "http://127.0.0.1:9/v1", {env: str(path)})
    assert str(caught.value) == f"test: tasks: {message}"
    assert "\n" not in str(caught.value) and not (tmp_path / "own.duckdb").exists()


def test_flags_and_files_a_run_cannot_use_are_one_line(tmp_path: Path) -> None:
    for args, needle in (
        (["--tasks", "kg"], "error: --tasks 'kg': expected ENV=PATH, e.g. os=my_os_tasks.json"),
        (["--tasks", f"kg={tmp_path / 'nothing.json'}"], f"error: flags: tasks: kg={tmp_path / 'nothing.json'}: cannot read (No such file or directory)"),
        (["--tasks", f"card_game={_kg_file(tmp_path)}", "--env", "card_game"], "error: flags: tasks: card_game reads no task file of your own (os, db, kg and ltp do)"),
    ):  # fmt: skip
        proc = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                               "--out", str(tmp_path / "x.duckdb"), *args], capture_output=True, text=True)  # fmt: skip
        assert proc.returncode == 2 and proc.stderr.startswith(needle) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    with pytest.raises(ConfigError, match=r"^test: tasks: kg=.*empty.json holds no task; give a JSON list of AgentBench knowledgegraph"):
        _config(tmp_path, "http://127.0.0.1:9/v1", {"kg": str(empty)})


def test_with_data_dir_too_the_own_file_is_played_and_never_called_official(tmp_path: Path) -> None:
    from agentbench_async.envs import make_env
    from agentbench_async.settings import deviations, official_tasks

    kg = _kg_file(tmp_path, count=2)
    cfg = build_config({"out": tmp_path / "x.duckdb", "envs": "kg", "models": ["m"], "data_dir": str(tmp_path), "tasks": {"kg": str(kg)}},
                       where="test")  # fmt: skip
    env = make_env("kg", data_dir=cfg.env_data_dir("kg"), options=cfg.env_options["kg"])
    assert [(t.task_id, t.source) for t in env.tasks("test")] == [("custom-0", "custom"), ("custom-1", "custom")]
    stored = cfg.public_dict()
    assert not official_tasks("kg", stored)
    assert [d.setting for d in deviations(stored)] == ["kg.tasks"]


async def test_an_own_os_file_is_played_in_the_sandbox(tmp_path: Path) -> None:
    from agentbench_async.envs.os_interaction.sandbox import check_available

    try:
        check_available()
    except AgentBenchError as exc:
        require(False, f"the os sandbox cannot run here ({exc})")
    path = tmp_path / "my_os.json"
    path.write_text(json.dumps(json.loads((environments_dir() / "os" / "dev.json").read_text())[:2], indent=1))
    server = MockModelServer(MockOptions(env_options={"os": {"tasks_file": str(path)}}))
    base_url = await server.start()
    try:
        summary = await run(_config(tmp_path, base_url, {"os": str(path)}))
    finally:
        await server.stop()
    assert summary.episodes == 4
    rows = query(tmp_path / "own.duckdb", "SELECT model, task_id, source, score FROM episodes ORDER BY ALL")
    assert [(m, t, s) for m, t, s, _ in rows] == [(m, f"custom-0000{i}", "custom") for m in ("mock-oracle", "mock-weak") for i in (0, 1)]
    assert [score for model, _, _, score in rows if model == "mock-oracle"] == [1.0, 1.0]
