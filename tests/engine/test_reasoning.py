"""Reasoning models end to end against the mock's reasoning modes: OpenAI's parameter rules, thinking
separated from the reply (fields, <think> content, Anthropic thinking blocks passed back with tool use),
stored and counted, the output budget told apart from the context window, AgentBench's raw behaviour on
request, and the config-time constraints of Anthropic's extended thinking."""

from __future__ import annotations

import io

import pytest
from engine_support import echo_config, query, run, start_mock
from rich.console import Console

from agentbench_async.analytics import load
from agentbench_async.analytics.commands import report as report_command
from agentbench_async.analytics.run_settings import episode_differences
from agentbench_async.analytics.transcript import render_episode
from agentbench_async.errors import ConfigError
from agentbench_async.mock.providers import THINKING_TEXT
from agentbench_async.models import ModelConfig
from agentbench_async.models.anthropic import _to_anthropic
from agentbench_async.models.reasoning import split_think

REASONING_MODEL = {"max_tokens_param": "max_completion_tokens", "temperature": None}


def test_split_think_separates_a_leading_block_only():
    assert split_think("<think>plan</think>\n\nANSWER: 5") == ("plan", "ANSWER: 5")
    assert split_think("  \n<think>\nplan\n</think>ANSWER: 5") == ("plan", "ANSWER: 5")
    assert split_think("plan from the template</think>\nANSWER: 5") == ("plan from the template", "ANSWER: 5")
    assert split_think("<think>cut while thinking") == ("cut while thinking", "")
    assert split_think("ANSWER: 5") == (None, "ANSWER: 5")
    text = "ANSWER: 5 and a quoted <think>x</think>"
    assert split_think(text) == (None, text)


async def test_openai_reasoning_rules_refusing_a_field_the_config_sets_fail_fast_naming_the_field(tmp_path):
    server = await start_mock(reasoning="openai")
    try:
        summary = await run(echo_config(tmp_path / "r.duckdb", server.base_url, models=[{"name": "mock-oracle", "max_tokens_param": "max_tokens"}],
                                        limit=5, max_concurrency=1))  # fmt: skip
    finally:
        await server.stop()
    assert summary.statuses == {"model_error": 1} and server.stats["requests"] == 1
    assert "max_tokens_param: max_completion_tokens" in summary.fatal_errors[0]


@pytest.mark.parametrize(("settings", "fix"), [
    ({"max_tokens_param": "max_completion_tokens", "temperature": 0}, "temperature: null"),
    ({**REASONING_MODEL, "reasoning_effort": "xhigh"}, "reasoning_effort"),  # documented, but not for this model
])  # fmt: skip
async def test_openai_parameter_rules_name_the_config_field(tmp_path, settings, fix):
    server = await start_mock(reasoning="openai")
    try:
        summary = await run(echo_config(tmp_path / "r.duckdb", server.base_url, models=[{"name": "mock-oracle", **settings}],
                                        limit=3, max_concurrency=1))  # fmt: skip
    finally:
        await server.stop()
    assert summary.statuses == {"model_error": 1} and fix in summary.fatal_errors[0]


async def test_openai_reasoning_model_configured_right_runs_and_counts_reasoning_tokens(tmp_path):
    server = await start_mock(reasoning="openai", reasoning_tokens=64)
    out = tmp_path / "r.duckdb"
    try:
        summary = await run(echo_config(out, server.base_url, models=[{"name": "mock-oracle", **REASONING_MODEL, "reasoning_effort": "low"}],
                                        limit=3))  # fmt: skip
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 3}
    assert query(out, "SELECT DISTINCT reasoning_tokens FROM model_calls") == [(64,)]
    with load(out) as res:
        usage = res.reasoning_usage.row(0, named=True)
    assert usage["reasoning_tokens"] == 64 * summary.calls and 0 < usage["reasoning_share"] < 1


async def test_output_budget_spent_thinking_is_not_a_context_overflow(tmp_path):
    server = await start_mock(reasoning="openai", reasoning_tokens=64)
    out = tmp_path / "b.duckdb"
    try:
        summary = await run(echo_config(out, server.base_url, models=[{"name": "mock-oracle", **REASONING_MODEL, "max_tokens": 48}], limit=2))
    finally:
        await server.stop()
    # the empty reply goes to the environment, which says what it always says of an empty reply
    assert summary.statuses == {"invalid_format": 2}
    kind, basis = query(out, "SELECT DISTINCT limit_kind, limit_basis FROM model_calls")[0]
    assert kind == "output_budget" and "48 output tokens (48 reasoning) of max_tokens 48" in basis
    with load(out) as res:
        reasons = res.failure_reasons
        thinking = res.reasoning_usage
    assert reasons["failure_class"].to_list() == ["invalid_format"]
    assert reasons["reason"].to_list() == ["output budget exhausted (reasoning)"]
    assert thinking["output_budget_exhausted"].to_list() == [2]
    console = Console(file=io.StringIO(), width=250)
    report_command([out], html=None, json_out=False, console=console)
    printed = console.file.getvalue()
    assert "Reasoning per model × environment" in printed and "output budget exhausted (reasoning)" in printed


@pytest.mark.parametrize("mode", ["reasoning_content", "reasoning", "think"])
async def test_thinking_is_separated_stored_and_kept_out_of_the_history(tmp_path, mode):
    server = await start_mock(reasoning=mode)
    out = tmp_path / "t.duckdb"
    try:
        # tasks 1 and 2 take 2 and 3 turns: the history of later turns carries earlier replies
        summary = await run(echo_config(out, server.base_url, limit=3))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 3}
    assert query(out, "SELECT avg(score) FROM episodes") == [(1.0,)], "the draft inside the thinking was not acted on"
    rows = query(out, "SELECT reasoning, content FROM turns WHERE role = 'assistant'")
    assert rows and all(r == THINKING_TEXT and "<think>" not in c and "999" not in c for r, c in rows)
    assert server.stats["thinking_in_history"] == 0


async def test_raw_handling_keeps_agentbench_behaviour(tmp_path):
    server = await start_mock(reasoning="think")
    out = tmp_path / "raw.duckdb"
    try:
        summary = await run(echo_config(out, server.base_url, models=[{"name": "mock-oracle", "reasoning_handling": "raw"}], limit=3))
    finally:
        await server.stop()
    # as upstream: the whole content reaches the parser, which takes the draft inside the thinking
    assert summary.statuses == {"completed": 3} and query(out, "SELECT max(score) FROM episodes") == [(0.0,)]
    assert query(out, "SELECT count(*) FROM turns WHERE role = 'assistant' AND content LIKE '<think>%' AND reasoning IS NULL")[0][0] >= 3


async def test_thinking_cut_from_the_content_is_named_with_the_replies_it_touched_and_raw_is_v02(tmp_path):
    """Defaults on a model that writes <think> into its content: the report, its JSON and the score's footnote name
    reasoning_handling with how many replies it touched; the same run with raw sends the whole content back and
    names nothing (AgentBench v0.2 parsed it whole: test_raw_handling_keeps_agentbench_behaviour)."""
    import json

    from agentbench_async.analytics.report import build_report

    outs = {}
    for handling in ("separate", "raw"):
        server = await start_mock(reasoning="think")
        outs[handling] = tmp_path / f"{handling}.duckdb"
        try:
            await run(echo_config(outs[handling], server.base_url, models=[{"name": "mock-oracle", "reasoning_handling": handling}], limit=3))
        finally:
            await server.stop()
    replies = query(outs["separate"], "SELECT count(*) FROM turns WHERE role = 'assistant'")[0][0]
    assert query(outs["separate"], "SELECT count(*) FROM turns WHERE think_removed")[0][0] == replies
    assert query(outs["raw"], "SELECT count(*) FROM turns WHERE think_removed")[0][0] == 0
    line = f"reasoning_handling: separate (thinking removed from {replies} of {replies} replies) — AgentBench v0.2 parsed the whole content"
    for handling, named in (("separate", True), ("raw", False)):
        console = Console(file=io.StringIO(), width=400)
        assert report_command([outs[handling]], html=None, json_out=False, console=console) == 0
        assert (line in console.file.getvalue()) is named
        with load(outs[handling]) as res:
            built = build_report(res)
            label = built.scores.filter(env="echo")["settings"][0]
            exported = json.loads(json.dumps(built.to_dict(), default=str))["settings_differing_from_agentbench"]
            shown = episode_differences(res, res.runs["run_id"][0], "echo")
        assert ("reasoning_handling" in label) is named and ("reasoning_handling" in shown) is named
        assert [r["value"] for r in exported if r["setting"] == "reasoning_handling"] == ([line.split(": ", 1)[1].split(" — ")[0]] if named else [])
        # the view's static export: the overview's settings list and every episode's page
        from agentbench_async.view.export import export

        site = tmp_path / f"site-{handling}"
        export([outs[handling]], site)
        pages = [site / "index.html", *site.glob("episodes/*/*.html")]
        assert len(pages) > 3 and all(("reasoning_handling" in p.read_text(encoding="utf-8")) is named for p in pages)
        assert (f"thinking removed from {replies} of {replies} replies" in (site / "index.html").read_text(encoding="utf-8")) is named


async def test_anthropic_thinking_blocks_go_back_unchanged_with_tool_use(tmp_path):
    server = await start_mock(reasoning="anthropic")
    out = tmp_path / "a.duckdb"
    model = {"name": "mock-oracle", "provider": "anthropic", "temperature": None, "max_tokens": 2048,
             "thinking": {"type": "enabled", "budget_tokens": 1024}}  # fmt: skip
    try:
        summary = await run(echo_config(out, server.base_url, models=[model], limit=3, action_mode="tools"))
    finally:
        await server.stop()
    # the mock refuses (400) a tool-use turn whose thinking block is missing or altered
    assert summary.statuses == {"completed": 3} and server.stats["reasoning_rule"] == 0
    assert query(out, "SELECT avg(score) FROM episodes") == [(1.0,)]
    assert query(out, "SELECT DISTINCT reasoning FROM turns WHERE role = 'assistant'") == [(THINKING_TEXT,)]


def test_thinking_blocks_lead_tool_use_turns_and_are_left_out_elsewhere():
    block = {"type": "thinking", "thinking": "t", "signature": "s1"}
    call = {"id": "c1", "type": "function", "function": {"name": "answer", "arguments": "{\"value\": 1}"}}
    _, converted = _to_anthropic([
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [call], "thinking_blocks": [block]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "done", "thinking_blocks": [block]},
    ])  # fmt: skip
    assert converted[1]["content"][0] == block and converted[1]["content"][1]["type"] == "tool_use"
    assert all(b["type"] != "thinking" for b in converted[3]["content"])


@pytest.mark.parametrize(("fields", "message"), [
    ({"temperature": 0}, "temperature: null"),
    ({"temperature": None, "thinking": {"type": "enabled", "budget_tokens": 512}}, ">= 1024"),
    ({"temperature": None, "max_tokens": 1024}, "must be below max_tokens"),
    ({"temperature": None, "extra_body": {"top_k": 5}}, "top_k"),
    ({"temperature": None, "provider": "openai"}, "reasoning_effort"),
    ({"temperature": None, "reasoning_effort": "high"}, "Anthropic has no reasoning_effort"),
    ({"temperature": None, "reasoning_handling": "strip"}, "reasoning_handling"),
])  # fmt: skip
def test_anthropic_thinking_constraints_are_checked_at_config_time(fields, message):
    raw = {"name": "c", "provider": "anthropic", "max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048}, **fields}
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**raw).check("models[0]")


def test_max_tokens_parameter_default_follows_the_server():
    assert ModelConfig(name="m").max_tokens_field == "max_completion_tokens"
    assert ModelConfig(name="m", base_url="https://api.openai.com/v1").max_tokens_field == "max_completion_tokens"
    assert ModelConfig(name="m", base_url="https://x.openai.azure.com/openai").max_tokens_field == "max_completion_tokens"
    assert ModelConfig(name="m", base_url="http://localhost:8000/v1").max_tokens_field == "max_tokens"
    assert ModelConfig(name="m", base_url="http://localhost:8000/v1", max_tokens_param="max_completion_tokens").max_tokens_field == "max_completion_tokens"
    assert ModelConfig(name="m", provider="anthropic").max_tokens_field == "max_tokens"


async def test_show_displays_the_reasoning_and_old_files_stay_readable(tmp_path):
    server = await start_mock(reasoning="think")
    out = tmp_path / "s.duckdb"
    try:
        await run(echo_config(out, server.base_url, limit=1))
    finally:
        await server.stop()
    with load(out) as res:
        console = Console(file=io.StringIO(), width=200)
        render_episode(res, "mock-oracle/echo/dev/dev-00000/0", console)
    shown = console.file.getvalue()
    assert "reasoning: Let me think" in shown and "latency ms" in shown
    assert "limit" not in shown  # no call ran into a limit: show leaves out the empty column

    # a file written before the reasoning columns existed: report and show still work
    import duckdb

    con = duckdb.connect(str(out))
    for table, column in (("turns", "reasoning"), ("model_calls", "reasoning_tokens"), ("model_calls", "limit_kind"),
                          ("model_calls", "limit_basis")):  # fmt: skip
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.close()
    console = Console(file=io.StringIO(), width=200)
    assert report_command([out], html=None, json_out=False, console=console) == 0
    with load(out) as res:
        render_episode(res, "mock-oracle/echo/dev/dev-00000/0", Console(file=io.StringIO()))
        assert res.reasoning_usage["reasoning_tokens"].to_list() == [None]
