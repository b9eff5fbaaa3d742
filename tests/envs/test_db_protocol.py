"""db: parsing, grading and observation rendering (no server needed)."""

from __future__ import annotations

import hashlib

import pytest

from agentbench_async.envs.base import EpisodeContext, Task
from agentbench_async.envs.db import DBEnvironment
from agentbench_async.envs.db.session import DBSession
from agentbench_async.envs.db.grading import answer_items, answers_match, metric_category, python_table_hash
from agentbench_async.envs.db.protocol import (
    ToolArgumentError,
    answers_argument,
    first_messages,
    parse_text,
    tool_arguments,
)
from agentbench_async.envs.db.server import parse_db_url
from agentbench_async.envs.db.sqltext import RowsText, error_text, split_statements, truncate
from agentbench_async.errors import ConfigError, EnvUnavailableError
from agentbench_async.types import ModelReply


@pytest.mark.parametrize(
    ("raw", "items"),
    [
        (' ["x", "y"]', ["x", "y"]),
        (" [5]", [5]),
        (' "abc"', ["a", "b", "c"]),  # upstream list(eval('"abc"'))
        (" 5", [" 5"]),  # not iterable: the raw text, leading space kept
        (" Vienna", [" Vienna"]),
        (' ["a"] * 3', [' ["a"] * 3']),  # an expression is never evaluated
        (" __import__('os').system('true')", [" __import__('os').system('true')"]),
    ],
)
def test_answer_items_follow_upstream_without_eval(raw: str, items: list[object]) -> None:
    assert answer_items(raw) == items


@pytest.mark.parametrize(
    ("answer", "label", "ok"),
    [
        (' ["12.50"]', ["12.5"], True),
        (' ["1"]', ["1.0"], True),
        (" [1174]", ["1174.0"], True),
        (' ["1,174"]', ["1174.0"], False),
        (' ["Vienna"]', ["Vienna International Airport"], False),
        (' ["win"]', ["Win"], False),  # exact, case-sensitive
        (' ["b", "a", "a"]', ["a", "b"], True),  # sets: order and duplicates ignored
        (" [5, 6]", ["5", "6"], False),  # 5 != '5' in a set
        (' [["x"], "y"]', ["x", "y"], False),  # unhashable item -> wrong, not a crash
        (' ["\\"House of Cards\\""]', ['"House of Cards"'], True),
    ],
)
def test_answer_comparison(answer: str, label: list[str], ok: bool) -> None:
    assert answers_match(answer_items(answer), label) is ok


def test_metric_categories() -> None:
    assert metric_category("INSERT") == "INSERT"
    assert metric_category("UPDATE") == "UPDATE"
    assert metric_category("ranking") == "SELECT"
    assert metric_category("DELETE") == "SELECT"  # upstream's metric puts DELETE with SELECT


def test_python_table_hash_formula() -> None:
    rows = [["a", "1"], ["b", None]]
    parts = sorted(hashlib.md5(s.encode()).hexdigest()[:5] for s in ("a,1", "b"))
    assert python_table_hash(rows) == str([(hashlib.md5(",".join(parts).encode()).hexdigest(),)])
    assert python_table_hash([]) == "[(None,)]"
    many = [[str(i)] for i in range(300)]  # 300 * 6 - 1 bytes: cut at 1024 like group_concat_max_len
    joined = ",".join(sorted(hashlib.md5(str(i).encode()).hexdigest()[:5] for i in range(300)))
    assert python_table_hash(many) == str([(hashlib.md5(joined[:1024].encode()).hexdigest(),)])


def test_text_parsing_matches_upstream_regexes() -> None:
    op = parse_text("Let me look.\nAction: Operation\n```sql\nSELECT *\nFROM t -- c\n```\n```sql\nDROP TABLE t\n```")
    assert op.wants_operation and op.sql == "SELECT * FROM t -- c"  # first block only, newlines -> spaces
    assert not parse_text("Action: Operation").wants_operation  # needs a newline after the action word
    assert parse_text("Action: Operation \n").action == "Operation "
    answer = parse_text('Done.\nAction: Answer\nFinal Answer: ["x"]\nmore')
    assert answer.final_answer == ' ["x"]'
    assert parse_text('Final Answer: ["x"]').final_answer is None  # must follow a newline
    assert parse_text('no action\nFinal Answer: ["x"]').final_answer == ' ["x"]'


def test_prompt_shape() -> None:
    record = {"description": "How many?", "add_description": "The name of this table is t, and the headers of this table are a."}
    msgs = first_messages(record, "text")
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[0]["content"].startswith("\n") and msgs[0]["content"].endswith("\n")
    assert "Action: Operation" in msgs[0]["content"] and "Final Answer:" in msgs[0]["content"]
    assert msgs[1]["content"] == "Ok."
    assert msgs[2]["content"] == "How many?\nThe name of this table is t, and the headers of this table are a."
    assert "execute_sql" in first_messages(record, "tools")[0]["content"]


def test_tool_arguments() -> None:
    assert answers_argument(tool_arguments('{"answers": ["a", "b"]}')) == ["a", "b"]
    assert answers_argument(tool_arguments('{"answers": "a"}')) == ["a"]
    for bad in ("{not json", "[1]"):
        with pytest.raises(ToolArgumentError):
            tool_arguments(bad)
    with pytest.raises(ToolArgumentError):
        answers_argument({"answers": {"x": 1}})


@pytest.mark.parametrize(
    ("sql", "n"),
    [
        ("SELECT 1", 1),
        ("SELECT 1;", 1),
        ("SELECT 1; -- trailing comment", 1),
        ("SELECT 1; SELECT 2", 2),
        ("SELECT ';' AS x", 1),
        ("SELECT 'it''s; fine', \"a;b\", `c;d` FROM t", 1),
        ("SELECT 'back\\'slash;' FROM t", 1),
        ("SELECT 1 /* ; */ + 1", 1),
        ("SELECT 1 # ; comment", 1),
        ("-- only a comment", 0),
        ("", 0),
        ("UPDATE t SET a = 1; DROP TABLE t;", 2),
    ],
)
def test_statement_splitting(sql: str, n: int) -> None:
    assert len(split_statements(sql)) == n


def test_rows_text_is_str_of_the_row_list_and_stops_early() -> None:
    rows = [("a", 1), ("b", None)]
    text = RowsText()
    text.add(rows)
    assert text.text() == str(rows) and not text.full
    many = [(f"value {i}", i) for i in range(10_000)]
    text = RowsText()
    text.add(iter(many))
    assert text.full and text.rows < 100
    assert truncate(text.text()) == truncate(str(many)) == str(many)[:800] + "[TRUNCATED]"
    assert truncate("[]") == "[]"
    assert error_text(1146, "42S02", "Table 'x.y' doesn't exist") == "1146 (42S02): Table 'x.y' doesn't exist"
    assert error_text(2013, None, "Lost connection").startswith("2013 (HY000): ")


def test_db_url_parsing() -> None:
    info = parse_db_url("mysql://bench:p%40ss@db.example:3307/")
    assert (info.host, info.port, info.user, info.password, info.account_host) == ("db.example", 3307, "bench", "p@ss", "%")
    assert parse_db_url("mysql://root@127.0.0.1/").port == 3306
    with pytest.raises(ConfigError, match="mysql://user:password@host:port/"):
        parse_db_url("postgres://x@y/")


async def test_missing_mariadb_names_the_package() -> None:
    env = DBEnvironment(options={"mariadbd": "/nonexistent/mariadbd"})
    with pytest.raises(EnvUnavailableError, match="apt-get install mariadb-server"):
        await env.start()
    await env.close()


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="statement_timeout"):
        DBEnvironment.check_options({"statement_timeout": "soon"})
    with pytest.raises(ConfigError, match="capacity"):
        _ = DBEnvironment(options={"capacity": 0}).capacity


def _select_session(mode: str = "text") -> DBSession:
    task = Task(env="db", split="dev", task_id="p", data={"type": ["counting"], "label": ["3"], "description": "How many?",
                                                          "table": {"table_name": "t", "table_info": {"columns": [], "rows": []}}})
    return DBSession(None, task, EpisodeContext(episode_id="p", action_mode=mode))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reply", "status", "paper"),
    [
        ('Action: Answer\nFinal Answer: ["3"]', "completed", "completed"),
        ("Action: Query\nSELECT 1", "invalid_format", "agent validation failed"),  # unknown action word
        ("Action: Operation \n```sql\nSELECT 1\n```", "invalid_format", "agent validation failed"),  # trailing space
        ('Action: Query\nFinal Answer: ["3"]', "completed", "completed"),  # the final answer still counts
        ("I think it is three.", "invalid_format", "agent validation failed"),
        ("Action: Operation\nSELECT 1;", "invalid_format", "agent validation failed"),  # no ```sql block
    ],
)
async def test_statuses_map_to_what_upstream_records(reply: str, status: str, paper: str) -> None:
    step = await _select_session().step(ModelReply(content=reply))
    assert step.outcome is not None
    assert (step.outcome.status, step.outcome.paper_status) == (status, paper)
    assert step.outcome.status != "invalid_action"  # upstream DBBench never records an invalid action


async def test_context_overflow_on_the_first_reply_is_a_validation_failure_upstream() -> None:
    outcome = await _select_session().on_context_limit("prompt too long")
    assert (outcome.status, outcome.paper_status) == ("context_limit_exceeded", "agent validation failed")
    # after the first reply it is AGENT_CONTEXT_LIMIT: test_db_server.py (needs a database for the operation)
