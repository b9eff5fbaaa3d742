"""One command for the whole benchmark: ``agentbench run --env all --data-dir DIR`` (or no --env) plays every environment,
each on its official tasks where it finds what it needs under DIR (or through its own flag), on its built-in suite
elsewhere; it says which per environment when it starts, stores it per episode (``episodes.source``) and in the run's
config (``data_dir_skipped``), and the report names the environments that did not play the paper's tasks."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from engine_support import mock_process, query
from support import OFFICIAL_DATA, require

from agentbench_async.config import build_config
from agentbench_async.envs import ENV_NAMES, available_envs
from agentbench_async.settings import deviations

HAS_MARIADB = bool(shutil.which("mariadbd") or os.access("/usr/sbin/mariadbd", os.X_OK))
HAS_ALFWORLD = all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld", "fast_downward"))
# what AgentBench's data/ folder (and `agentbench data pull`) holds for each environment; the rest need their own download
OFFICIAL_HERE = {"os", "db", "card_game", "ltp"}
SKIPPED_HERE = {"kg": "--kg-endpoint", "alfworld": "--alfworld-data", "webshop": "--webshop-data"}


def _config(tmp_path: Path, data_dir: Path, *, envs: object = "all", **settings: object):  # type: ignore[no-untyped-def]
    raw = {"out": tmp_path / "r.duckdb", "models": ["m"], "judge": "j", "data_dir": data_dir, "split": "test", **settings}
    if envs is not None:
        raw["envs"] = envs
    return build_config(raw, where="test")


def test_every_environment_in_one_command_official_tasks_where_the_data_dir_has_them(tmp_path: Path) -> None:
    require(OFFICIAL_DATA.is_dir(), f"the official AgentBench data is not at {OFFICIAL_DATA}")
    require(HAS_MARIADB, "mariadbd is not installed (apt-get install mariadb-server)")
    require(HAS_ALFWORLD, "the alfworld extra is not installed (pip install -e '.[alfworld]')")
    out = tmp_path / "all.duckdb"
    with mock_process("--data-dir", str(OFFICIAL_DATA)) as base_url:
        proc = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "run", "--model", "mock-oracle", "--base-url", base_url,
                               "--task-header", "--judge-model", "mock-judge", "--env", "all", "--data-dir", str(OFFICIAL_DATA),
                               "--limit", "1", "--no-progress", "--out", str(out)],
                              capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    said = {line.partition(":")[0]: line.partition(":")[2] for line in proc.stderr.splitlines() if line.partition(":")[0] in ENV_NAMES}
    assert set(said) == set(ENV_NAMES), proc.stderr  # one line per environment when the run starts
    for env in OFFICIAL_HERE:
        assert said[env].strip() == "official tasks", said[env]
    for env, flag in SKIPPED_HERE.items():
        assert said[env].startswith(" built-in suite, without --data-dir (") and flag in said[env], said[env]
    assert "built-in suite" in said["mind2web"] and "separate download" in said["mind2web"]  # its prompt file is read from there
    rows = dict(query(out, "SELECT env, list(DISTINCT source) FROM episodes GROUP BY env"))
    assert rows == {env: ["official" if env in OFFICIAL_HERE else "builtin"] for env in ENV_NAMES}
    assert query(out, "SELECT count(*) FROM episodes WHERE status <> 'completed' AND NOT success") == [(0,)]
    # every turn stored: each episode has the model's replies and the calls that made them
    assert query(out, "SELECT count(*) FROM episodes e WHERE n_turns < 1 OR n_turns > (SELECT count(*) FROM turns t WHERE "
                      "t.episode_id = e.episode_id AND t.role = 'assistant')") == [(0,)]  # fmt: skip
    (config,) = query(out, "SELECT config FROM runs")[0]
    skipped = json.loads(config)["data_dir_skipped"]
    assert sorted(skipped) == sorted(SKIPPED_HERE)
    report = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "report", str(out), "--json"], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert report.returncode == 0, report.stderr
    settings = {s["env"]: s["settings"] for s in json.loads(report.stdout)["scores"]}
    for env in ENV_NAMES:  # the report keeps the sources apart: built-in suites are named beside their scores
        assert ("data" in str(settings[env])) == (env not in OFFICIAL_HERE), (env, settings[env])


def test_no_env_is_every_environment_and_a_run_without_skips_keeps_its_fingerprint(tmp_path: Path) -> None:
    require(OFFICIAL_DATA.is_dir(), f"the official AgentBench data is not at {OFFICIAL_DATA}")
    every = _config(tmp_path, OFFICIAL_DATA)
    assert every.envs == available_envs() and _config(tmp_path, OFFICIAL_DATA, envs=None).envs == every.envs
    assert sorted(every.data_dir_skipped) == sorted(SKIPPED_HERE)
    assert every.env_data_dir("kg") is None and every.env_data_dir("db") == OFFICIAL_DATA
    # naming the environments skips nothing (a missing download fails when the environment starts, as before); such runs
    # resume each other whatever their environments, but not a run of every environment that played some without the data
    named = _config(tmp_path, OFFICIAL_DATA, envs="db,ltp")
    assert named.data_dir_skipped == {} and named.public_dict()["data_dir_skipped"] == {}
    assert named.fingerprint() == _config(tmp_path, OFFICIAL_DATA, envs="db").fingerprint() != every.fingerprint()
    assert every.public_dict()["data_dir_skipped"] == every.data_dir_skipped


def test_a_plain_agentbench_data_folder_without_the_pulled_prompt_sources(tmp_path: Path) -> None:
    """AgentBench's own data/ (no upstream-prompts/): the environments that read their wording from the pulled sources run
    without it, saying which file they missed (their built-in suites run, in the project's wording, named)."""
    require(OFFICIAL_DATA.is_dir(), f"the official AgentBench data is not at {OFFICIAL_DATA}")
    plain = tmp_path / "data"
    plain.mkdir()
    for folder in OFFICIAL_DATA.iterdir():
        if folder.name != "upstream-prompts":
            (plain / folder.name).symlink_to(folder)
    cfg = _config(tmp_path, plain)
    assert cfg.data_dir_skipped["card_game"].startswith(f"no {plain / 'upstream-prompts' / 'v0.2'}")
    assert cfg.data_dir_skipped["alfworld"].startswith("no ") and "upstream-prompts" in cfg.data_dir_skipped["alfworld"]
    assert "upstream-prompts/v0.2/src/server/tasks/os_interaction/task.py" in cfg.data_dir_skipped["os"]
    assert "upstream-prompts/v0.2/src/server/tasks/dbbench/__init__.py" in cfg.data_dir_skipped["db"]
    assert "upstream-prompts/v0.2/src/server/tasks/ltp/task.py" in cfg.data_dir_skipped["ltp"]
    assert "mind2web" not in cfg.data_dir_skipped
    stored = cfg.public_dict()
    settings = {d.setting: d for d in deviations(stored)}
    for env in ("card_game", "os", "db", "ltp"):  # their own wording, named
        assert settings[f"{env}.prompts"].envs == (env,)
    assert set(settings["data"].envs) == {"os", "db", "kg", "ltp", "alfworld", "webshop", "mind2web"}  # card_game's games are upstream's own
    # an environment's own flag feeds it although --data-dir cannot (the games folder given: not skipped for the games)
    games = tmp_path / "alfworld-data"
    games.mkdir()
    cfg = _config(tmp_path, OFFICIAL_DATA, env_options={"alfworld": {"alfworld_data": str(games)}})
    assert "alfworld" not in cfg.data_dir_skipped


def test_tools_mode_of_every_environment_is_every_environment_with_a_tools_mode(tmp_path: Path) -> None:
    require(OFFICIAL_DATA.is_dir(), f"the official AgentBench data is not at {OFFICIAL_DATA}")
    cfg = _config(tmp_path, OFFICIAL_DATA, action_mode="tools")
    assert set(cfg.envs) == {"os", "db", "kg", "alfworld", "webshop"} & set(available_envs())


@pytest.mark.parametrize("env", ["kg", "webshop"])
def test_naming_an_environment_whose_official_data_is_absent_still_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str], env: str) -> None:
    from agentbench_async.cli import main

    require(OFFICIAL_DATA.is_dir(), f"the official AgentBench data is not at {OFFICIAL_DATA}")
    code = main(["run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--env", env, "--data-dir", str(OFFICIAL_DATA),
                 "--no-progress", "--out", str(tmp_path / "x.duckdb")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and SKIPPED_HERE[env] in err, err
