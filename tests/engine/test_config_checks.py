"""Every option and config value is checked when the run starts: types, ranges, choices, unknown names refused with
the valid ones; one line naming the field and what is valid, exit code 2, before anything starts (no file, no
call). Task files that are not UTF-8 get the one-line error; mind2web without its data is refused like the others."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from engine_support import query

from agentbench_async.cli import main
from agentbench_async.envs import available_envs, env_class
from agentbench_async.envs.db.tasks import OFFICIAL_FILES

UNREACHABLE = "http://127.0.0.1:9/v1"  # nothing listens: a call would be an error of its own


def _run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str, at_start: bool = False) -> str:
    """The one line of a refused ``agentbench run``; refused before the result file exists, or (``at_start``: a file
    an environment reads when it starts) before any call."""
    out = tmp_path / "never.duckdb"
    code = main(["run", "--base-url", UNREACHABLE, "--no-progress", "--out", str(out), *args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    if at_start:
        assert query(out, "SELECT count(*) FROM model_calls") == [(0,)]
        out.unlink()
    else:
        assert not out.exists(), "refused before anything started"
    return lines[0]


@pytest.mark.parametrize(("model", "needles"), [
    ({"temperature": "hot"}, ["models[0].temperature", "from 0 to 2", "'hot'"]),
    ({"temperature": float("nan")}, ["models[0].temperature", "nan"]),
    ({"temperature": 2.5}, ["models[0].temperature", "from 0 to 2 (openai)"]),
    ({"provider": "anthropic", "temperature": 1.5}, ["models[0].temperature", "from 0 to 1 (anthropic)"]),
    ({"temperature": True}, ["models[0].temperature", "True"]),
    ({"reasoning_effort": "extreme"}, ["models[0].reasoning_effort", "none, minimal, low, medium, high, xhigh", "extra_body"]),
    ({"retry_backoff_s": -3}, ["models[0].retry_backoff_s", "seconds >= 0", "-3"]),
    ({"retry_backoff_max_s": float("inf")}, ["models[0].retry_backoff_max_s", "inf"]),
    ({"retry_after_max_s": -1}, ["models[0].retry_after_max_s", "-1"]),
    ({"timeout": float("nan")}, ["models[0].timeout", "seconds > 0"]),
    ({"rate_window_s": 0}, ["models[0].rate_window_s", "seconds > 0"]),
    ({"extra_body": [1, 2]}, ["models[0].extra_body", "mapping", "[1, 2]"]),
    ({"headers": ["a"]}, ["models[0].headers", "mapping", "['a']"]),
    ({"headers": {"X-Id": 7}}, ["models[0].headers", "text values"]),
    ({"extra_body": {"messages": []}}, ["models[0].extra_body.messages", "may not replace messages, model, tools"]),
    ({"extra_body": {"model": "other"}}, ["models[0].extra_body.model", "may not replace"]),
    ({"extra_body": {"tools": []}}, ["models[0].extra_body.tools", "may not replace"]),
    ({"task_header": "yes"}, ["models[0].task_header", "true or false"]),
    ({"api_key_env": 5}, ["models[0].api_key_env", "non-empty string"]),
    ({"max_retries": -1}, ["models[0].max_retries", "an integer >= 0"]),
    ({"tempreature": 0}, ["models[0]", "unknown field 'tempreature'", "temperature"]),
])  # fmt: skip
def test_bad_model_values_are_refused_in_one_line_before_the_run(capsys, tmp_path, model, needles):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"envs": ["echo"], "models": [{"name": "m", **model}]}), encoding="utf-8")
    line = _run(capsys, tmp_path, "--config", str(config))
    for needle in needles:
        assert needle in line, line


@pytest.mark.parametrize(("option", "needles"), [
    ("db.capacty=3", ["db: unknown option 'capacty'", "(valid: capacity, datadir_cache, db_url, mariadb_install_db, mariadbd, "
                      "official_variant, port, statement_timeout, tmp_mb)"]),
    ("db.capacity=abc", ["db: option capacity='abc' must be a positive integer"]),
    ("db.capacity=2.5", ["db: option capacity='2.5' must be a positive integer"]),
    ("db.statement_timeout=nan", ["db: option statement_timeout='nan' must be a number > 0"]),
    ("db.statement_timeout=-1", ["statement_timeout='-1'"]),
    ("db.port=70000", ["db: option port='70000' must be a positive integer up to 65535"]),
    ("db.datadir_cache=maybe", ["db: option datadir_cache='maybe' must be true or false"]),
    ("db.tmp_mb=-1", ["db: option tmp_mb='-1' must be a non-negative integer"]),
    ("db.db_url=http://x", ["db: option db_url='http://x' must be a URL starting with mysql:// or mariadb://"]),
    ("db.official_variant=v9", ["db: option official_variant='v9' must be one of v0.2, fc"]),
    ("kg.kg_endpoint=ftp://x", ["kg: option kg_endpoint='ftp://x' must be a URL starting with http:// or https://"]),
    ("kg.kg_timeout=0", ["kg: option kg_timeout='0' must be a number > 0"]),
    ("kg.kg_max_queries=-2", ["kg: option kg_max_queries='-2' must be a positive integer"]),
    ("ltp.language=fr", ["ltp: option language='fr' must be one of en, zh"]),
    ("ltp.rounds=0", ["ltp: option rounds='0' must be a positive integer"]),
    ("card_game.fixes=yes", ["card_game: option fixes='yes' must be true or false"]),
    ("card_game.decision_seconds=-1", ["card_game: option decision_seconds='-1' must be a non-negative integer"]),
    ("card_game.test_tme=3", ["card_game: unknown option 'test_tme'", "test_time"]),
    ("alfworld.workers=0", ["alfworld: option workers='0' must be a positive integer"]),
    ("alfworld.official_variant=v1", ["alfworld: option official_variant='v1' must be one of v0.2, fc"]),
    ("webshop.test_range=5:2", ["webshop: option test_range='5:2' must be START:END with 0 <= START < END"]),
    ("webshop.price_seed=-1", ["webshop: option price_seed='-1' must be a non-negative integer"]),
    ("mind2web.prompt=x", ["mind2web: option prompt='x' must be one of cot, plain"]),
    ("mind2web.range_min=-1", ["mind2web: option range_min='-1' must be a non-negative integer"]),
    ("echo.turns=many", ["echo: option turns='many' must be a non-negative integer"]),
    ("os.concurrency=0", ["os: option concurrency='0' must be a positive integer"]),
    ("os.shm_mb=lots", ["os: option shm_mb='lots' must be a positive integer"]),
    ("nosuch.x=1", ["env_options: unknown environment 'nosuch'"]),
])  # fmt: skip
def test_bad_environment_options_are_refused_in_one_line_before_the_run(capsys, tmp_path, option, needles):
    line = _run(capsys, tmp_path, "--model", "m", "--env", "echo", "--env-option", option)
    for needle in needles:
        assert needle in line, line


def test_every_environment_declares_its_options():
    for name in [*available_envs(), "echo"]:
        assert env_class(name).option_specs, f"{name} declares no options"


def test_a_db_task_file_that_is_not_utf8_is_one_line(capsys, tmp_path):
    data = tmp_path / "data"
    (data / "dbbench").mkdir(parents=True)
    (data / "dbbench" / OFFICIAL_FILES["dev"]).write_bytes(b'{"description": "caf\xe9"}\n')
    line = _run(capsys, tmp_path, "--model", "m", "--env", "db", "--split", "dev", "--data-dir", str(data), at_start=True)
    assert f"{data / 'dbbench' / OFFICIAL_FILES['dev']}: not UTF-8 text (byte 20 cannot be decoded)" in line, line


def test_kg_ontology_and_alfworld_split_files_that_are_not_utf8_are_one_line(capsys, tmp_path):
    ontology = tmp_path / "ontology"
    ontology.mkdir()
    (ontology / "vocab.json").write_text('{"relations": [], "attributes": []}', encoding="utf-8")
    (ontology / "fb_roles").write_bytes(b"a \xff b\n")
    line = _run(capsys, tmp_path, "--model", "m", "--env", "kg", "--env-option", f"kg.kg_ontology={ontology}", at_start=True)
    assert f"{ontology / 'fb_roles'}: not UTF-8 text" in line, line
    data = tmp_path / "data"
    (data / "alfworld").mkdir(parents=True)
    (data / "alfworld" / "dev.json").write_bytes(b"{\"a\": \"\xc3\x28\"}")
    line = _run(capsys, tmp_path, "--model", "m", "--env", "alfworld", "--split", "dev", "--data-dir", str(data), at_start=True)
    assert f"{data / 'alfworld' / 'dev.json'}: not UTF-8 text" in line, line


def test_mind2web_with_a_data_dir_without_its_prompt_file_is_one_line_like_the_others(capsys, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    line = _run(capsys, tmp_path, "--model", "m", "--env", "mind2web", "--data-dir", str(data), at_start=True)
    assert "prompt file not found (AgentBench's data/mind2web/prompt/llm_prompt_cot.json)" in line, line
    webshop = _run(capsys, tmp_path, "--model", "m", "--env", "webshop", "--data-dir", str(data), at_start=True)
    assert webshop.startswith("error: webshop: AgentBench's data folder has no WebShop data")
