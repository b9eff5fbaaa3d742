"""db: task files — official loader counts, built-in suites, the generator, bad records."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from agentbench_async.envs.db import DBEnvironment
from agentbench_async.envs.db.tasks import builtin_path
from agentbench_async.errors import ConfigError, TaskFileError
from support import load_generator



def test_official_dev_and_std_load_with_readme_counts(official_data_dir: Path) -> None:
    env = DBEnvironment(data_dir=official_data_dir)
    dev = list(env.tasks("dev"))
    test = list(env.tasks("test"))
    assert len(dev) == 60 and len(test) == 300
    assert all(t.source == "official" for t in dev + test)
    dev_types = Counter(t.data["type"][0] for t in dev)
    assert dev_types["INSERT"] == 20 and dev_types["UPDATE"] == 20 and sum(dev_types.values()) - 40 == 20
    test_types = Counter(t.data["type"][0] for t in test)
    assert test_types == {
        "INSERT": 100, "UPDATE": 100, "other": 17, "counting": 17, "comparison": 17, "ranking": 17,
        "aggregation-SUM": 8, "aggregation-MIN": 8, "aggregation-MAX": 8, "aggregation-AVG": 8,
    }
    assert test[0].task_id == "test-0000" and test[0].data["label"] == ["Women +60kg Bronze"]
    # the data dir may also point straight at the dbbench folder
    assert DBEnvironment(data_dir=official_data_dir / "dbbench").count("dev") == 60


def test_builtin_suites_are_big_and_varied() -> None:
    env = DBEnvironment()
    dev, test = list(env.tasks("dev")), list(env.tasks("test"))
    assert len(dev) >= 20 and len(test) >= 50
    for tasks in (dev, test):
        types = Counter(t.data["type"][0] for t in tasks)
        for kind in ("other", "counting", "comparison", "ranking", "aggregation-SUM", "aggregation-MIN",
                     "aggregation-MAX", "aggregation-AVG", "INSERT", "UPDATE", "DELETE"):
            assert types[kind] >= 3, kind
        for t in tasks:
            assert t.source == "builtin"
            if t.data["type"][0] in ("INSERT", "UPDATE", "DELETE"):
                assert t.data["answer_md5"].startswith("[('") and t.data["label"][0].split()[0] == t.data["type"][0]
            else:
                assert t.data["label"] and t.data["sql"]["query"].startswith("SELECT")
    # the built-in tables are the project's own, not copies of official ones
    assert not {t.data["table"]["table_name"] for t in dev + test} & {"Jiu-Jitsu Championships Results", "football_stats"}


def test_generator_output_is_committed_unchanged() -> None:
    fresh = load_generator("db").build()
    for split in ("dev", "test"):
        assert builtin_path(split).read_text(encoding="utf-8") == fresh[split], (
            f"environments/db/{split}.jsonl is stale: run PYTHONPATH=src python environments/db/generate.py"
        )


def _write(tmp_path: Path, lines: list[str]) -> Path:
    folder = tmp_path / "dbbench"
    folder.mkdir()
    (folder / "dev.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


GOOD = {
    "description": "How many rows?",
    "type": ["counting"],
    "label": ["2"],
    "table": {"table_name": "t", "table_info": {"columns": [{"name": "a", "type": "TEXT"}], "rows": [["x"], ["y"]]}},
    "add_description": "The name of this table is t, and the headers of this table are a.",
}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"dev.jsonl:2: not valid JSON"),
        (json.dumps({**GOOD, "type": "counting"}), r"dev.jsonl:2: 'type' must be a one-element list"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "table"}), r"dev.jsonl:2: missing field 'table'"),
        (json.dumps({**GOOD, "label": "2"}), r"dev.jsonl:2: a SELECT-like record needs 'label'"),
        (json.dumps({**GOOD, "type": ["UPDATE"]}), r"dev.jsonl:2: a UPDATE record needs 'answer_md5'"),
    ],
)
def test_bad_records_give_one_line_errors(tmp_path: Path, line: str, message: str) -> None:
    env = DBEnvironment(data_dir=_write(tmp_path, [json.dumps(GOOD), line]))
    with pytest.raises(TaskFileError, match=message) as info:
        list(env.tasks("dev"))
    assert "\n" not in str(info.value)


def test_missing_official_file_and_unknown_split(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="dbbench/standard.jsonl"):
        list(DBEnvironment(data_dir=tmp_path).tasks("test"))
    with pytest.raises(TaskFileError, match="unknown split"):
        list(DBEnvironment().tasks("train"))


def test_official_fc_variant_loads_the_fixed_std_copy(official_data_dir: Path) -> None:
    env = DBEnvironment(data_dir=official_data_dir, options={"official_variant": "fc"})
    test = list(env.tasks("test"))
    assert len(test) == 300 and env.count("dev") == 60
    columns = [c["name"] for c in test[13].data["table"]["table_info"]["columns"]]
    assert len(columns) == len(set(columns))  # v0.2's duplicate 'Score' columns are renamed in FC
    with pytest.raises(ConfigError, match="official_variant=.v9. must be one of v0.2, fc"):
        list(DBEnvironment(data_dir=official_data_dir, options={"official_variant": "v9"}).tasks("test"))
