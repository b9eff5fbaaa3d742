"""Replies a server should not send, read at the edge (models/replies.py): every episode is stored, a value the
client repairs or drops is noted on the call, a reply it cannot read is the model's fault (retried, then
model_error naming what was wrong), never an env_error and never a traceback (serve-mock --faults plays each)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from engine_support import echo_config, mock_process, query, run, start_mock

from agentbench_async.mock.bad_replies import MALFORMED, REPAIRABLE

WHAT = {  # the words of the model_error, per wire format
    "body_null": ("the body is null", "the body is null"),
    "body_list": ("the body is a list", "the body is a list"),
    "message_null": ("choices[0].message is null", "content is null, expected a list"),
    "content_list": ("message.content[0] is the number 1", "content[0] is a string, expected an object"),
    "content_dict": ("message.content is an object, expected a string", "content is an object, expected a list"),
    "usage_list": ("usage is a list", "usage is a list"),
    "usage_number": ("usage is the number inf", "usage is the number inf"),
    "finish_reason_int": ("choices[0].finish_reason is the number 123", "stop_reason is the number 123"),
    "tool_name_null": ("message.tool_calls[0].function.name is null", "content[1].name is null"),
}
NOTE = {
    "surrogate": "lone surrogate(s) (not valid UTF-8) replaced with U+FFFD",
    "usage_huge": "1e+30 is not a token count",
    "usage_inf": "inf is not a token count",
}
PROVIDERS = ("openai", "anthropic")


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("kind", sorted(MALFORMED))
async def test_unreadable_reply_is_retried_then_model_error_naming_what_was_wrong(tmp_path, kind, provider):
    server = await start_mock(fault_script=[kind] * 2)
    out = tmp_path / "m.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "provider": provider, "max_retries": 1}], limit=2,
                          max_concurrency=1)  # fmt: skip
        summary = await run(cfg)
    finally:
        await server.stop()
    assert summary.statuses == {"model_error": 1, "completed": 1}
    (error,) = query(out, "SELECT error FROM episodes WHERE status = 'model_error'")[0]
    assert "giving up after 2 attempts: malformed reply: " in error
    assert WHAT[kind][PROVIDERS.index(provider)] in error
    calls = query(out, "SELECT http_status, error FROM model_calls WHERE error IS NOT NULL ORDER BY started_at")
    assert [c[0] for c in calls] == [200, 200] and all(c[1].startswith("malformed reply: ") for c in calls)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("kind", sorted(REPAIRABLE))
async def test_bad_values_are_repaired_or_dropped_and_noted_and_the_episode_goes_on(tmp_path, kind, provider):
    server = await start_mock(fault_script=[kind])
    out = tmp_path / "r.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "provider": provider}], limit=1)
        summary = await run(cfg)
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 1} and summary.retries == 0
    (first,) = query(out, "SELECT note, input_tokens, output_tokens, error FROM model_calls WHERE turn = 1")
    note, input_tokens, output_tokens, error = first
    assert NOTE[kind] in note and error is None
    if kind == "usage_huge":
        assert input_tokens is None and output_tokens > 0
    if kind == "usage_inf":
        assert output_tokens is None and input_tokens > 0
    if kind == "surrogate":
        (content,) = query(out, "SELECT content FROM turns WHERE role = 'assistant' AND turn = 1")[0]
        assert content.endswith("\n\ufffd")
    assert query(out, "SELECT score FROM episodes") == [(1.0,)]


def test_agentbench_run_against_every_bad_reply_stores_every_episode_without_a_traceback(tmp_path):
    out = tmp_path / "all.duckdb"
    kinds = ",".join([*MALFORMED, *REPAIRABLE])
    with mock_process("--fault-rate", "0.5", "--faults", kinds, "--seed", "3") as base_url:
        proc = subprocess.run(
            [sys.executable, "-m", "agentbench_async.cli", "run", "--model", "mock-oracle", "--base-url", base_url, "--task-header",
             "--env", "echo", "--split", "dev", "--limit", "18", "--max-retries", "2", "--no-progress", "--out", str(out)],
            capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    rows = query(out, "SELECT status, count(*) FROM episodes GROUP BY ALL")
    statuses = dict(rows)
    assert sum(statuses.values()) == 18 and "env_error" not in statuses, statuses
    assert statuses.get("completed", 0) > 0
    noted = query(out, "SELECT count(*) FROM model_calls WHERE note IS NOT NULL")[0][0]
    malformed = query(out, "SELECT count(*) FROM model_calls WHERE starts_with(error, 'malformed reply: ')")[0][0]
    assert noted > 0 and malformed > 0

