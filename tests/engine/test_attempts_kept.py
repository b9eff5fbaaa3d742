"""Nothing recorded is deleted: an episode run again after an infrastructure failure (within the run, by default, or by a
resume) keeps its earlier attempts with their failed calls, scores count the final attempt, and the report says how many
episodes needed more than one attempt and why."""

from __future__ import annotations

import duckdb
from engine_support import echo_config, query, run, start_mock

from agentbench_async.analytics import notes
from agentbench_async.analytics.loading import load
from agentbench_async.analytics.report import build_report
from agentbench_async.config import build_config
from agentbench_async.store import db as store_db
from agentbench_async.store import live


async def test_resume_after_an_outage_keeps_every_failed_attempt_and_the_report_says_so(tmp_path):
    # the server fails the first 6 requests: with max_retries 2, the first two episodes end model_error (3 failed calls each)
    server = await start_mock(fault_script=["503"] * 6, retry_after_s=0.01)
    out = tmp_path / "r.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "max_retries": 2}], limit=3, max_concurrency=1,
                          infra_retries=0)  # fmt: skip
        first = await run(cfg)
        assert first.statuses == {"model_error": 2, "completed": 1}
        failed_before = query(out, "SELECT count(*) FROM model_calls WHERE http_status = 503")[0][0]
        assert failed_before == 6
        second = await run(cfg)  # the resume after the outage
    finally:
        await server.stop()
    assert second.statuses == {"completed": 2}
    # one row per episode, the final attempt, and what the scores count
    assert query(out, "SELECT count(*), count(DISTINCT episode_id), sum(score) FROM episodes") == [(3, 3, 3.0)]
    assert query(out, "SELECT attempts, count(*) FROM episodes GROUP BY ALL ORDER BY 1") == [(1, 1), (2, 2)]
    # every failed attempt is kept, with its calls and turns, numbered and tied to the run that replaced it
    assert query(out, "SELECT count(*) FROM attempt_calls WHERE http_status = 503") == [(failed_before,)]
    assert query(out, "SELECT status, episode_attempt, superseded_by FROM episode_attempts ORDER BY episode_id") == [
        ("model_error", 1, second.run_id), ("model_error", 1, second.run_id)]  # fmt: skip
    assert query(out, "SELECT count(*) FROM attempt_turns") == [(2,)]  # each failed attempt's prompt
    with load(out) as res:
        summary = res.attempt_summary.row(0, named=True)
        assert (summary["retried"], summary["earlier_attempts"], summary["failed_calls"], summary["recovered"], summary["still_failing"]) == (2, 2, 6, 2, 0)
        assert summary["top_reason"].startswith("model_error: mock-oracle: giving up after 3 attempts: HTTP 503")
        report = build_report(res)
        assert report.scores["score"].to_list() == [1.0]
        # the operations count every call made, the earlier attempts' too (billed, and the outage's record)
        assert res.calls.filter(res.calls["earlier_attempt"] == 1)["http_status"].to_list() == [503] * 6
        assert res.http_statuses.filter(res.http_statuses["http_status"] == 503)["attempts"].to_list() == [6]
    lines = notes.attempt_lines(report.attempts)
    assert len(lines) == 1 and "2 episodes needed more than one attempt (2 earlier attempts kept, 6 failed calls" in lines[0]
    assert "2 scored on a later attempt, none still failing" in lines[0]


async def test_an_infrastructure_failure_is_retried_within_the_run_by_default(tmp_path):
    server = await start_mock(fault_script=["503"] * 3, retry_after_s=0.01)
    out = tmp_path / "r.duckdb"
    try:
        model = {"name": "mock-oracle", "base_url": server.base_url, "task_header": True, "max_retries": 2, "retry_backoff_s": 0.01}
        cfg = build_config({"out": out, "envs": ["echo"], "split": "dev", "limit": 2, "max_concurrency": 1, "models": [model],
                            "infra_retry_backoff_s": 0.05}, where="test")  # fmt: skip
        assert cfg.infra_retries == 2  # the default
        summary = await run(cfg)
    finally:
        await server.stop()
    # scored as if the outage had not happened, and the run says how many it retried
    assert summary.statuses == {"completed": 2} and summary.episodes == 2
    assert sum(summary.retried.values()) == 1 and "1 attempt ended by an infrastructure failure run again" in summary.retry_lines()[0]
    assert query(out, "SELECT status, attempts FROM episodes ORDER BY episode_id") == [("completed", 2), ("completed", 1)]
    assert query(out, "SELECT status, episode_attempt FROM episode_attempts") == [("model_error", 1)]
    assert query(out, "SELECT count(*) FROM attempt_calls WHERE http_status = 503") == [(3,)]
    assert query(out, "SELECT count(*) FROM model_calls WHERE http_status = 503") == [(0,)]


async def test_retries_are_bounded_and_what_still_fails_is_shown_apart(tmp_path):
    server = await start_mock(fault_script=["503"] * 9, retry_after_s=0.01)  # three attempts of one episode fail
    out = tmp_path / "r.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "max_retries": 2, "max_same_failures": 0}], limit=1,
                          infra_retries=2, infra_retry_backoff_s=0.01)  # fmt: skip
        summary = await run(cfg)
    finally:
        await server.stop()
    assert summary.statuses == {"model_error": 1} and sum(summary.retried.values()) == 2
    assert query(out, "SELECT status, attempts FROM episodes") == [("model_error", 3)]
    assert query(out, "SELECT episode_attempt FROM episode_attempts ORDER BY 1") == [(1,), (2,)]
    with load(out) as res:
        row = res.env_scores.row(0, named=True)
        assert (row["model_errors"], row["score"]) == (1, 0.0)
        assert res.attempt_summary.select("retried", "still_failing", "recovered").row(0) == (1, 1, 0)


async def test_operations_are_per_configuration(tmp_path):
    server = await start_mock()
    out = tmp_path / "r.duckdb"
    try:
        for max_tokens in (128, 256):  # two deciding configurations of one model in one file
            await run(echo_config(out, server.base_url, models=[{"name": "mock-oracle", "max_tokens": max_tokens}], limit=2, new_run=True))
    finally:
        await server.stop()
    with load(out) as res:
        usage = build_report(res).usage
        configurations = res.configurations  # what each configuration was, joined on config_id
    requests = query(out, "SELECT count(*) FROM model_calls AS c JOIN runs AS r USING (run_id) WHERE c.attempt = 1 GROUP BY r.fingerprint")
    assert usage.height == 2 and usage["requests"].to_list() == [n for (n,) in requests] == [3, 3]  # one row each, never pooled
    assert sorted(usage["config"].to_list()) == ["max_tokens: 128", "max_tokens: 256"]
    assert sorted(configurations["config_id"].to_list()) == sorted(usage["config_id"].to_list())
    assert [len(runs) for runs in configurations["runs"].to_list()] == [1, 1] and configurations["models"].to_list() == [["mock-oracle"]] * 2


async def test_a_live_reader_sees_the_final_attempt_of_an_episode_retried_within_the_run(tmp_path, monkeypatch):
    # what the writer publishes for readers in other processes equals the file: the earlier attempt of an episode retried
    # within the run (stored, then moved by the retry's transaction) is hidden, whether its part was merged or not
    monkeypatch.setattr(live, "_FANOUT", 2)
    monkeypatch.setattr(live, "_GRACE_S", 0.0)
    monkeypatch.setattr(store_db, "remove_live_dir", lambda path: None)  # keep the last snapshot to compare
    server = await start_mock(fault_script=["503"] * 12, retry_after_s=0.01, latency_ms=50)
    out = tmp_path / "r.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "max_retries": 0, "max_same_failures": 0}], limit=16,
                          max_concurrency=4, infra_retries=3, infra_retry_backoff_s=0.3)  # fmt: skip
        summary = await run(cfg)
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 16} and sum(summary.retried.values()) >= 4
    manifest = live.read_manifest(out)
    assert manifest is not None
    con = duckdb.connect()
    try:
        live.create_live_views(con, "snap", out, manifest)
        for table, key in (("episodes", "episode_id, status, attempts"), ("turns", "episode_id, seq, content"),
                           ("model_calls", "episode_id, turn, attempt, http_status")):  # fmt: skip
            published = sorted(con.execute(f"SELECT {key} FROM snap.{table}").fetchall())
            assert published == sorted(query(out, f"SELECT {key} FROM {table}")), table
    finally:
        con.close()
