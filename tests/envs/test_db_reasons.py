"""db: an invalid-format reply gets the reason of db's taxonomy the parser found (what was missing or wrong, with the
nearest match), so three different mistakes are three reasons in the report, each with an example."""

from __future__ import annotations

import html
import os
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from support import require
from view.view_support import get, viewer

from agentbench_async.analytics import load
from agentbench_async.analytics.report import build_report
from agentbench_async.analytics.terminal import render
from agentbench_async.config import build_config
from agentbench_async.environment import stable_choice
from agentbench_async.envs.base import EpisodeContext, Task
from agentbench_async.envs.db import reasons
from agentbench_async.envs.db.session import DBSession
from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.scheduler import Evaluation
from agentbench_async.types import ModelReply

HAS_MARIADB = bool(shutil.which("mariadbd") or os.access("/usr/sbin/mariadbd", os.X_OK))


def _session() -> DBSession:
    task = Task(env="db", split="dev", task_id="p", data={"type": ["counting"], "label": ["3"], "description": "How many?",
                                                          "table": {"table_name": "t", "table_info": {"columns": [], "rows": []}}})
    return DBSession(None, task, EpisodeContext(episode_id="p", action_mode="text"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reply", "label", "nearest"),
    [
        ("Let me check.\n```sql\nSELECT count(*) FROM t;\n```", reasons.SQL_WITHOUT_OPERATION, "```sql SELECT count(*) FROM t; ```"),
        ("Action: operation\n```sql\nSELECT 1;\n```", reasons.SQL_WITHOUT_OPERATION, "Action: operation"),
        ('I counted them.\n**Final Answer**: ["3"]', reasons.BOLD_ANSWER_TAG, '**Final Answer**: ["3"]'),
        ("There are three ships in the table.", reasons.PROSE, "There are three ships in the table."),
        ('Final Answer: ["3"]', reasons.ANSWER_TAG_FIRST, 'Final Answer: ["3"]'),
        ('Action: Answer\nfinal answer: ["3"]', reasons.ANSWER_TAG_SPELLING, 'final answer: ["3"]'),
        ("Action: Answer\nIt is 3.", reasons.ANSWER_WITHOUT_TAG, "Action: Answer"),
        ("Action: Guess\nthree", reasons.UNKNOWN_ACTION, "Action: Guess"),
        ("Action: Operation\nSELECT 1;", reasons.OPERATION_WITHOUT_SQL, "SELECT 1;"),
        ("   ", reasons.EMPTY, None),
    ],
)
async def test_each_invalid_format_names_what_the_parser_saw(reply: str, label: str, nearest: str | None) -> None:
    step = await _session().step(ModelReply(content=reply))
    assert step.outcome is not None and step.outcome.status == "invalid_format"
    assert step.outcome.paper_status == "agent validation failed"  # upstream's status is unchanged
    assert step.outcome.details["failure_reason"] == label
    assert step.outcome.error == (f'{label}; nearest: "{nearest}"' if nearest else label)
    assert step.error == step.outcome.error


async def _run(out: Path, limit: int) -> None:
    server = MockModelServer(MockOptions(policy="oracle", latency_ms=1))
    base_url = await server.start()
    try:
        raw = {"out": out, "split": "dev", "envs": ["db"], "limit": limit, "max_concurrency": 8,
               "models": [{"name": "mock-format_misses", "base_url": base_url, "task_header": True}]}  # fmt: skip
        await Evaluation(build_config(raw, where="test"), console=Console(quiet=True), progress=False).run()
    finally:
        await server.stop()


async def test_three_kinds_of_invalid_db_format_are_three_reasons_in_the_report(tmp_path: Path) -> None:
    require(HAS_MARIADB, "mariadbd is not installed (apt-get install mariadb-server)")
    out, limit = tmp_path / "db.duckdb", 9
    await _run(out, limit)
    with load(out) as res:
        ids = res.episodes["task_id"].to_list()
        expected: dict[str, int] = {}
        for task_id in ids:  # the policy's choice per task
            label = (reasons.SQL_WITHOUT_OPERATION, reasons.BOLD_ANSWER_TAG, reasons.PROSE)[stable_choice(task_id, 3)]
            expected[label] = expected.get(label, 0) + 1
        assert len(expected) == 3, "the built-in tasks chosen must cover the three formats"
        rows = res.failure_reasons.filter(res.failure_reasons["failure_class"] == "invalid_format")
        assert dict(zip(rows["reason"].to_list(), rows["episodes"].to_list())) == expected
        for r in rows.iter_rows(named=True):  # an example each, with what the parser found nearest
            assert r["examples"][0]["error"].startswith(r["reason"] + '; nearest: "')
        report = build_report(res)
    assert set(report.reasons.filter(report.reasons["failure_class"] == "invalid_format")["reason"].to_list()) == set(expected)
    console = Console(width=80, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    render(report, console)
    text = " ".join(console.export_text().split())
    for label in expected:  # each reason printed with an example reply
        assert f"reason: {label}" in text
    # the view's failures page: the same reasons, each with an example episode linked
    async with viewer([out]) as base:
        status, page, _ = await get(base + "/failures")
    assert status == 200
    reasons_table = html.unescape(page.split('data-table="reasons"')[1].split("</table>")[0])
    for label in expected:
        assert label in reasons_table
    assert reasons_table.count('href="/episode?id=mock-format_misses') == 3
