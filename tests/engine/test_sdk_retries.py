"""Retries as the SDKs (issue 35): the pause read from retry-after-ms, then Retry-After in seconds or as an HTTP
date; x-should-retry decides over the status; 408, 409, 429 and every 5xx retried; a model whose requests are all
refused the same permanent way is stopped after max_same_failures (default 5) in a row, one line, and its episodes
are left for a resume after the fix. Through the CLI against a scripted loopback server. Fixture:
tests/fixtures/conventions/sdk_retries.json (read from openai-python 3.3.1 and anthropic-sdk-python 0.121.0)."""

from __future__ import annotations

import email.utils
import json
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from multidict import CIMultiDict
from engine_support import app_in_thread, query

from agentbench_async.cli import main
from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.models.base import retry_after_seconds, retryable_status, server_pause

SDK = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "conventions" / "sdk_retries.json").read_text(encoding="utf-8"))
RUN = ["run", "--task-header", "--env", "echo", "--split", "dev", "--no-progress", "--max-concurrency", "1", "--model", "mock-oracle",
       "--infra-retries", "0"]  # the requests of one attempt, as the SDK sends them (the retry within the run: test_attempts_kept.py)


class _Scripted:
    """The mock model behind a script: the first requests get the scripted (status, headers, body), or every one
    while ``always`` is set; the rest the mock's answer. Each request's arrival time is kept."""

    def __init__(self, script: list[tuple[int, dict[str, Any], Any]], *, always: bool = False) -> None:
        self.script, self.always = list(script), always
        self.arrivals: list[float] = []

    def app(self) -> web.Application:
        server = MockModelServer(MockOptions(policy="oracle"))
        app = server.app()

        @web.middleware
        async def scripted(request: web.Request, handler):  # type: ignore[no-untyped-def]
            self.arrivals.append(time.monotonic())
            if self.script:
                status, headers, body = self.script[0] if self.always else self.script.pop(0)
                # a header given as a function is computed as the reply is sent (a date relative to that moment)
                return web.json_response(body, status=status, headers={k: v() if callable(v) else v for k, v in headers.items()})
            return await handler(request)

        app.middlewares.append(scripted)
        return app


def _run(capsys: pytest.CaptureFixture[str], server: _Scripted, out: Path, *args: str) -> tuple[int, str]:
    with app_in_thread(server.app) as port:
        code = main([*RUN, "--base-url", f"http://127.0.0.1:{port}/v1", "--out", str(out), *args])
    return code, capsys.readouterr().err


_ERROR = {"error": {"message": "try later", "type": "server_error"}}


def test_the_pause_headers_are_read_in_the_sdks_order():
    ms, seconds, date = SDK["pause_headers_in_order"]
    both = CIMultiDict({ms["header"]: ms["example"], seconds["header"]: seconds["example"]})  # as aiohttp gives them
    assert server_pause(both) == pytest.approx(ms["seconds"]), "retry-after-ms wins"
    assert server_pause(CIMultiDict({seconds["header"]: seconds["example"]})) == seconds["seconds"]
    now = email.utils.mktime_tz(email.utils.parsedate_tz(date["example"]))
    assert retry_after_seconds(date["example"], now=now - 7) == pytest.approx(7.0)
    assert retry_after_seconds(date["example"], now=now + 7) == 0.0, "a date passed: no pause"
    assert server_pause(CIMultiDict({"retry-after-ms": "soon", "Retry-After": "3"})) == 3.0
    assert server_pause(CIMultiDict({"Retry-After": "soon"})) is None


def test_the_sdks_status_set_is_retried():
    retried = [s for s in range(400, 600) if retryable_status(s)]
    assert retried == [*SDK["retried_statuses"], *range(SDK["retried_from_status"], 600)]


def test_retry_after_ms_is_the_pause(capsys, tmp_path):
    server = _Scripted([(429, {"retry-after-ms": "830", "retry-after": "3"}, _ERROR)])
    out = tmp_path / "ms.duckdb"
    code, err = _run(capsys, server, out, "--limit", "1")
    assert code == 0, err
    gap = server.arrivals[1] - server.arrivals[0]
    assert 0.8 <= gap < 1.6, f"waited {gap:.2f} s: the SDK waits 0.83 s, not the 3 s of retry-after"
    assert query(out, "SELECT http_status, retry_after_s FROM model_calls ORDER BY attempt")[0] == (429, pytest.approx(0.83))


def test_an_http_date_retry_after_is_the_pause(capsys, tmp_path):
    # whole seconds: 2 to 3 s after the reply is sent (not after the test began: a loaded machine's run start takes seconds)
    server = _Scripted([(503, {"Retry-After": lambda: email.utils.formatdate(time.time() + 3, usegmt=True)}, _ERROR)])
    code, err = _run(capsys, server, tmp_path / "date.duckdb", "--limit", "1")
    assert code == 0, err
    gap = server.arrivals[1] - server.arrivals[0]
    assert 1.8 <= gap < 6, f"waited {gap:.2f} s for a Retry-After 2-3 s ahead (backoff alone: under 0.5 s)"


def test_x_should_retry_false_is_not_retried(capsys, tmp_path):
    server = _Scripted([(503, {"x-should-retry": "false"}, _ERROR)])
    out = tmp_path / "no.duckdb"
    code, err = _run(capsys, server, out, "--limit", "1")
    assert len(server.arrivals) == 1, "one request, as the SDK sends"
    assert query(out, "SELECT status FROM episodes") == [("model_error",)]
    assert query(out, "SELECT note FROM model_calls") == [("not retried: x-should-retry: false",)]
    assert "x-should-retry: false" in err


@pytest.mark.parametrize(("status", "headers"), [(400, {"x-should-retry": "true"}), (520, {}), (409, {})])
def test_x_should_retry_true_and_the_sdks_statuses_are_retried(capsys, tmp_path, status, headers):
    server = _Scripted([(status, headers, _ERROR)])
    out = tmp_path / "yes.duckdb"
    code, err = _run(capsys, server, out, "--limit", "1")
    assert code == 0, err
    assert query(out, "SELECT http_status FROM model_calls ORDER BY attempt") == [(status,), (200,)]
    assert query(out, "SELECT status FROM episodes") == [("completed",)]


def test_a_model_refused_the_same_way_every_time_is_stopped_and_resumes_after_the_fix(capsys, tmp_path):
    refusal = {"error": {"message": "Unrecognized request argument supplied: frobnicate", "type": "invalid_request_error"}}
    server = _Scripted([(400, {}, refusal)], always=True)
    out = tmp_path / "stop.duckdb"
    code, err = _run(capsys, server, out, "--limit", "12")
    assert code == 1, err
    said = [line for line in err.splitlines() if "stopped after 5 requests in a row were refused the same way" in line]
    assert len(said) == 1, err
    assert len(server.arrivals) == 10, "5 episodes, each refused twice; the other 7 never sent"
    assert query(out, "SELECT count(*), count(*) FILTER (WHERE json_extract(details, '$.permanent') IS NOT NULL) "
                      "FROM episodes") == [(5, 0)], "the 5 are stored as model errors a resume re-runs, not permanent ones"  # fmt: skip
    fixed = _Scripted([])
    code, err = _run(capsys, fixed, out, "--limit", "12")
    assert code == 0, err
    assert query(out, "SELECT status, count(*) FROM episodes GROUP BY status") == [("completed", 12)]


def test_different_refusals_or_answers_in_between_do_not_stop_the_model(capsys, tmp_path):
    refusal = {"error": {"message": "this one task's request is refused", "type": "invalid_request_error"}}
    server = _Scripted([(400, {}, refusal), (400, {}, refusal)] * 1)  # one episode refused for good, then answers
    out = tmp_path / "one.duckdb"
    code, err = _run(capsys, server, out, "--limit", "6")
    assert code == 0, err
    assert "stopped after" not in err
    rows = query(out, "SELECT status, json_extract(details, '$.permanent') IS NOT NULL FROM episodes ORDER BY status")
    assert rows == [("completed", False)] * 5 + [("model_error", True)], "a permanent refusal of one episode stays permanent"
