"""Batch mode against the mock's OpenAI Batch API and Anthropic Message Batches: requests of all episodes in
flight are batched, results go back to the waiting episodes, failed and expired requests are retried in later
batches, the providers' queue limits are respected, and a run killed with batches in flight resumes by
collecting them (no batch submitted again, no request paid twice)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import aiohttp
import duckdb
import pytest
import yaml
from engine_support import echo_config, query, run, serve_app, start_mock

from agentbench_async.errors import ConfigError
from agentbench_async.models.batch_api import ANTHROPIC_ERROR_STATUS, OpenAIBatchAPI
from agentbench_async.models.batches import batch_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "providers"
FAST = {"size": 4, "wait_s": 0.05, "poll_s": 0.02, "poll_max_s": 0.1}
TASKS = {"env_options": {"echo": {"turns": 3, "tasks": 6}}}


def _model(provider: str, **batch: object) -> list[dict]:
    return [{"name": "mock-oracle", "provider": provider, "batch": {**FAST, **batch}}]


def _paid(server) -> Counter[str]:
    """Requests the mock ran successfully (what a provider bills), by request key (custom_id = key-attempt)."""
    return Counter(custom_id.rsplit("-", 1)[0] for custom_id, n in server.batches.processed.items() for _ in range(n))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_every_request_goes_through_batches_and_episodes_finish(tmp_path, provider):
    server = await start_mock(batch_delay_s=0.02)
    try:
        out = tmp_path / "b.duckdb"
        summary = await run(echo_config(out, server.base_url, models=_model(provider), **TASKS))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 6}
    assert query(out, "SELECT count(*) FROM episodes WHERE success") == [(6,)]
    assert server.stats["requests"] == 0, "no direct call in batch mode"
    rows = query(out, "SELECT batch_id, http_status, attempt, input_tokens FROM model_calls")
    assert len(rows) == 18 and all(r[0] and r[1] == 200 and r[2] == 1 and r[3] > 0 for r in rows)
    assert len({r[0] for r in rows}) == server.batches.stats["batches_created"] >= 3, "requests of several episodes share batches"
    assert max(_paid(server).values()) == 1 and sum(_paid(server).values()) == 18
    assert query(out, "SELECT count(*), count(batch_id) FROM batches WHERE status IN ('completed', 'ended')") == [(len({r[0] for r in rows}),) * 2]
    assert query(out, "SELECT count(*) FROM batch_requests") == [(18,)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_errored_requests_are_retried_in_a_later_batch(tmp_path, provider):
    server = await start_mock(batch_delay_s=0.02, batch_error_script=["error", "ok", "error"])
    try:
        out = tmp_path / "b.duckdb"
        summary = await run(echo_config(out, server.base_url, models=_model(provider), **TASKS))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 6}
    failed = query(out, "SELECT episode_id, turn, batch_id, http_status FROM model_calls WHERE attempt = 1 AND http_status <> 200")
    assert len(failed) == 2 and {r[3] for r in failed} == {500}
    for episode, turn, batch, _ in failed:
        retried = query(out, f"SELECT batch_id, http_status FROM model_calls WHERE episode_id = '{episode}' AND turn = {turn} AND attempt = 2")
        assert retried and retried[0][1] == 200 and retried[0][0] != batch


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_batch_that_expires_half_done_has_its_rest_retried(tmp_path, provider):
    server = await start_mock(batch_delay_s=0.02, batch_expire_batches=1)
    try:
        out = tmp_path / "b.duckdb"
        models = [{"name": "mock-oracle", "provider": provider, "batch": {**FAST, "size": 6, "wait_s": 0.3}}]
        summary = await run(echo_config(out, server.base_url, models=models, **TASKS))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 6}
    assert server.batches.stats["batches_expired" if provider == "openai" else "batches_expired"] == 1
    first = query(out, "SELECT batch_id FROM model_calls ORDER BY started_at LIMIT 1")[0][0]
    in_first = query(out, f"SELECT http_status, error FROM model_calls WHERE batch_id = '{first}'")
    assert len(in_first) == 6
    done, expired = [r for r in in_first if r[0] == 200], [r for r in in_first if r[0] != 200]
    assert len(done) == 3 and len(expired) == 3 and all("expired" in r[1] for r in expired)
    assert query(out, "SELECT count(*) FROM model_calls WHERE attempt = 2 AND http_status = 200") == [(3,)]
    assert max(_paid(server).values()) == 1, "the requests that ran before the expiry are not run again"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_providers_queue_limit_is_respected_without_using_up_retries(tmp_path, provider):
    server = await start_mock(batch_delay_s=0.05, batch_max_in_progress=1)
    try:
        out = tmp_path / "b.duckdb"
        models = [{"name": "mock-oracle", "provider": provider, "max_retries": 0, "batch": {**FAST, "size": 2}}]
        summary = await run(echo_config(out, server.base_url, models=models, **TASKS))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 6}, "a full queue is waited out, not counted as the requests' failure"
    assert server.batches.stats["batches_refused"] >= 1
    assert max(_paid(server).values()) == 1


async def test_our_own_batch_limit_holds(tmp_path):
    server = await start_mock(batch_delay_s=0.05)
    seen = []

    async def watch() -> None:
        while True:
            seen.append(sum(1 for b in server.batches.batches.values() if b.ended_at is None))
            await asyncio.sleep(0.005)

    watcher = asyncio.create_task(watch())
    try:
        out = tmp_path / "b.duckdb"
        models = [{"name": "mock-oracle", "batch": {**FAST, "size": 1, "max_batches": 2}}]
        summary = await run(echo_config(out, server.base_url, models=models, **TASKS))
    finally:
        watcher.cancel()
        await server.stop()
    assert summary.statuses == {"completed": 6}
    assert max(seen) == 2


def test_batch_settings_are_checked():
    assert batch_settings(None, "m") is None and batch_settings(False, "m") is None
    assert batch_settings(True, "m").size == 100 and batch_settings(7, "m").size == 7
    with pytest.raises(ConfigError, match=r"m\.batch: unknown field 'sise'"):
        batch_settings({"sise": 3}, "m")
    with pytest.raises(ConfigError, match=r"m\.batch\.size: expected a positive integer"):
        batch_settings(0, "m")
    with pytest.raises(ConfigError, match="batch_discount"):
        echo_config(Path("x.duckdb"), "http://127.0.0.1:1/v1", models=[{"name": "m", "batch_discount": 2}])


def _shape(value: object) -> object:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return type(value).__name__ if value is not None else None


async def test_mock_batch_objects_have_the_providers_shape(tmp_path):
    server = await start_mock(batch_delay_s=0.0, batch_expire_batches=0)
    try:
        await run(echo_config(tmp_path / "o.duckdb", server.base_url, models=_model("openai"), **TASKS))
        await run(echo_config(tmp_path / "a.duckdb", server.base_url, models=_model("anthropic"), **TASKS))
        openai = next(b for b in server.batches.batches.values() if not b.anthropic)
        anthropic = next(b for b in server.batches.batches.values() if b.anthropic)
        obj = server.batches._openai_object(openai)
        fixture = json.loads((FIXTURES / "batch_openai_batch.json").read_text())["body"]
        assert set(obj) == set(fixture) and set(obj["request_counts"]) == set(fixture["request_counts"])
        line = next(iter(openai.results.values()))
        fixture_lines = json.loads((FIXTURES / "batch_openai_output.json").read_text())
        assert set(line) == set(fixture_lines["succeeded"]) and set(line["response"]) == set(fixture_lines["succeeded"]["response"])
        result = next(iter(anthropic.results.values()))
        fixture_results = json.loads((FIXTURES / "batch_anthropic_results.json").read_text())
        assert set(result) == set(fixture_results["succeeded"]) and result["result"]["type"] == "succeeded"
        assert set(result["result"]["message"]["usage"]) == set(fixture_results["succeeded"]["result"]["message"]["usage"])
        fixture = json.loads((FIXTURES / "batch_anthropic_message_batch.json").read_text())["body"]
        assert set(fixture) <= {"id", "type", "processing_status", "request_counts", "ended_at", "created_at", "expires_at",
                                "archived_at", "cancel_initiated_at", "results_url"}  # fmt: skip
        assert set(fixture_results["errored"]["result"]["error"]["error"]["type"] for _ in [0]) <= set(ANTHROPIC_ERROR_STATUS)
    finally:
        await server.stop()


async def test_openai_s_failed_batch_for_the_enqueued_limit_is_read_as_a_full_queue(tmp_path):
    """The body OpenAI's Batch API returns for a batch refused at its enqueued-token limit (fixture): the engine
    reads it as a full queue (wait for a batch to end, no retry spent), and the mock refuses in that shape."""
    from aiohttp import web

    from agentbench_async.models import ModelConfig, ModelLimits, make_client

    fixture = json.loads((FIXTURES / "batch_openai_failed_token_limit.json").read_text())["body"]
    app = web.Application()

    async def batch(request: web.Request) -> web.Response:
        return web.json_response(fixture)

    app.router.add_get("/v1/batches/{id}", batch)
    async with serve_app(app) as port:
        session = aiohttp.ClientSession()
        try:
            client = make_client(ModelConfig(name="m", base_url=f"http://127.0.0.1:{port}/v1"), session, ModelLimits())
            state = await OpenAIBatchAPI(client).retrieve(fixture["id"])
        finally:
            await session.close()
    assert state.ended and state.status == "failed" and state.failure_code == "token_limit_exceeded"
    assert state.failure == fixture["errors"]["data"][0]["message"]

    # the mock's refusal has the fixture's shape: the same fields, errors as a list of BatchError objects
    server = await start_mock(batch_delay_s=0.05, batch_max_in_progress=1)
    try:
        models = [{"name": "mock-oracle", "provider": "openai", "batch": {**FAST, "size": 2}}]
        summary = await run(echo_config(tmp_path / "b.duckdb", server.base_url, models=models, **TASKS))
        refused = next(b for b in server.batches.batches.values() if b.failed_errors)
        obj = server.batches._openai_object(refused)
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 6}
    assert set(obj) == set(fixture) and obj["status"] == "failed"
    assert [set(e) for e in obj["errors"]["data"]] == [set(e) for e in fixture["errors"]["data"]]
    assert obj["errors"]["object"] == "list" and obj["errors"]["data"][0]["code"] == "token_limit_exceeded"


# -- kill -9 with batches in flight, then resume ----------------------------------------------------------
N_TASKS = 30


async def _start_run(config: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentbench_async.cli", "run", "--config", str(config), "--no-progress",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ},
    )  # fmt: skip


@pytest.mark.parametrize("lose_ids", [False, True], ids=["recorded", "killed-before-the-id-was-recorded"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_kill_9_with_batches_in_flight_then_resume_collects_them(tmp_path, provider, lose_ids):
    server = await start_mock(batch_delay_s=0.6)
    out = tmp_path / "crash.duckdb"
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "out": str(out), "envs": ["echo"], "split": "test", "max_concurrency": 50,
        "env_options": {"echo": {"tasks": N_TASKS, "turns": 3}},
        "models": [{"name": "mock-oracle", "provider": provider, "base_url": server.base_url, "task_header": True,
                    "batch": {"size": 10, "wait_s": 0.05, "poll_s": 0.05, "poll_max_s": 0.2}}],
    }))  # fmt: skip
    try:
        proc = await _start_run(config)
        deadline = time.monotonic() + 90  # the run's start alone takes seconds on a loaded machine
        while time.monotonic() < deadline:  # wait for turn-2 batches: turn 1 was collected, turn 2 is in flight
            if server.batches.stats["batches_created"] >= 5 or proc.returncode is not None:
                break
            await asyncio.sleep(0.01)
        in_flight = [b.id for b in server.batches.batches.values() if b.ended_at is None]
        assert in_flight, "the kill must land while batches are in progress"
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        created_before = server.batches.stats["batches_created"]
        stored_before = query(out, "SELECT count(*) FROM episodes")[0][0]
        assert stored_before < N_TASKS
        recorded = {r[0] for r in query(out, "SELECT custom_id FROM batch_requests")}
        in_flight_requests = {item["custom_id"] for b in in_flight for item in server.batches.batches[b].requests}
        assert in_flight_requests <= recorded, "every request of a created batch was recorded before the batch was created"
        if lose_ids:  # as if the kill fell between creating these batches and writing their ids
            con = duckdb.connect(str(out))
            con.execute(f"UPDATE batches SET batch_id = NULL, status = 'submitting' WHERE batch_id IN ({', '.join(repr(b) for b in in_flight)})")
            con.close()

        proc2 = await _start_run(config)
        _, err = await proc2.communicate()
        assert proc2.returncode == 0, err.decode()
    finally:
        await server.stop()
    assert query(out, "SELECT count(*), count(DISTINCT episode_id) FROM episodes WHERE success") == [(N_TASKS, N_TASKS)]
    submitted = Counter()
    for batch in server.batches.batches.values():
        submitted.update(item["custom_id"] for item in batch.requests)
    assert max(submitted.values()) == 1, "no request was submitted in two batches"
    assert max(_paid(server).values()) == 1, "no request was paid twice"
    paid_total = sum(_paid(server).values())
    assert paid_total == N_TASKS * 3
    # the resumed run collected the killed run's batches: their results are stored with their batch ids
    resumed = {r[0] for r in query(out, "SELECT DISTINCT batch_id FROM model_calls")}
    assert set(in_flight) <= resumed
    assert query(out, "SELECT count(*) FROM model_calls WHERE http_status = 200") == [(paid_total,)]
    assert server.batches.stats["batches_created"] > created_before  # later turns were batched anew


async def test_progress_shows_batches_submitted_in_progress_and_done(tmp_path):
    import io

    from rich.console import Console

    from agentbench_async.scheduler import Evaluation

    server = await start_mock(batch_delay_s=0.02)
    buffer = io.StringIO()
    try:
        cfg = echo_config(tmp_path / "p.duckdb", server.base_url, models=_model("openai"), **TASKS)
        evaluation = Evaluation(cfg, console=Console(file=buffer, force_terminal=True, width=400), progress=True)
        await evaluation.run()
    finally:
        await server.stop()
    created = server.batches.stats["batches_created"]
    shown = " ".join(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue()).split())  # the live display, as the terminal got it
    assert f"batches {created} submitted / 0 in progress / {created} done" in shown
    snapshot = evaluation.progress.snapshot()  # what live readers of the file see
    assert (snapshot["batches_submitted"], snapshot["batches_in_progress"], snapshot["batches_done"]) == (created, 0, created)


def test_batch_and_prompt_caching_flags():
    from agentbench_async.cli import _parser, _run_settings
    from agentbench_async.config import build_config

    base = ["run", "--model", "m", "--provider", "anthropic", "--env", "echo", "--out", "x.duckdb"]
    cfg = build_config(_run_settings(_parser().parse_args([*base, "--batch", "--no-prompt-caching"])))
    assert batch_settings(cfg.models[0].batch, "m").size == 100 and cfg.models[0].prompt_caching is False
    cfg = build_config(_run_settings(_parser().parse_args([*base, "--batch", "25"])))
    assert batch_settings(cfg.models[0].batch, "m").size == 25 and cfg.models[0].prompt_caching is True
    assert build_config(_run_settings(_parser().parse_args(base))).models[0].batch is None


async def test_a_recorded_batch_the_provider_no_longer_has_is_submitted_again(tmp_path):
    server = await start_mock(batch_delay_s=3.0)  # the batch must still be running when the run is killed
    out = tmp_path / "gone.duckdb"
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "out": str(out), "envs": ["echo"], "split": "test", "max_concurrency": 20,
        "env_options": {"echo": {"tasks": 10, "turns": 2}},
        "models": [{"name": "mock-oracle", "base_url": server.base_url, "task_header": True,
                    "batch": {"size": 10, "wait_s": 0.05, "poll_s": 0.05, "poll_max_s": 0.2}}],
    }))  # fmt: skip
    try:
        proc = await _start_run(config)
        deadline = time.monotonic() + 90  # the run's start alone takes seconds on a loaded machine
        while time.monotonic() < deadline:
            # polled: the run has recorded the batch's id (the ledger entry is written before the first poll)
            if server.batches.stats["batch_polls"] >= 1 or proc.returncode is not None:
                break
            await asyncio.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        for batch_id in list(server.batches.batches):  # archived or deleted at the provider before the resume
            server.batches.batches.pop(batch_id).cancel = True
        proc2 = await _start_run(config)
        _, err = await proc2.communicate()
        assert proc2.returncode == 0, err.decode()
    finally:
        await server.stop()
    assert query(out, "SELECT count(*) FROM episodes WHERE success") == [(10,)]
    assert query(out, "SELECT count(*) FROM batches WHERE status = 'gone'") == [(1,)]
    assert query(out, "SELECT count(*) FROM model_calls WHERE error LIKE '%no longer has it%'") == [(10,)]
