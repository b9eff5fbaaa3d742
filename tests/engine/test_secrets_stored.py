"""Issue 44: no secret of the client's in anything a run stores or prints.

A loopback server plays the hostile or careless servers of the issue, each reached by one model of the same run: a
debugging proxy that replies with the request it got (the ``Authorization`` header, so the key, in the reply: stored
in turns, the episode's answer, its details), an error body quoting the key past character 300 (cut to 300 before it
was redacted, 21 of 44 characters of the key were stored), a 5xx doing the same (retried, then ``model_error``), and
a gateway whose base_url carries a user and password. The run goes through the real CLI; then the result file (raw
bytes and every value of every table), the terminal report, the HTML report and the static export are searched for
every 8-character piece of the key and of the password: none may be there. The server must have received the key
(else nothing was tested) and the echoes must have reached the engine (the masks are stored where the key was)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
from aiohttp import web
from engine_support import app_in_thread

from agentbench_async.cli import main
from agentbench_async.redaction import Redactor

KEY = "sk-proj-Q7vX2mLp9RtZ4kWn8YbC3dHf6JsA1eGu5NoT0iKr"  # 48 characters, as OpenAI's project keys look
PASSWORD = "Gw-Pa55word-Xy9qLm"  # in the gateway's base_url
DB_PASSWORD = "db#Pa55-Zt81wq"  # a '#' in it: the redaction used to stop there


def _pieces(secret: str) -> list[str]:
    return [secret[i : i + 8] for i in range(len(secret) - 7)]


def _leaks(text: str | bytes) -> list[str]:
    """The 8-character pieces of the key or the passwords in ``text``."""
    hay = text.decode("latin-1") if isinstance(text, bytes) else text
    return [p for secret in (KEY, PASSWORD, DB_PASSWORD) for p in _pieces(secret) if p in hay]


def _echoing_server(seen: list[str]) -> web.Application:
    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        auth = request.headers.get("Authorization", "")
        seen.append(auth)
        echoed = f"{dict(request.headers)} {json.dumps(body)}"
        kind = body["model"]
        if kind == "proxy":  # a debugging proxy: the request comes back as the reply
            content = f"ANSWER: {auth.removeprefix('Bearer ')}\nthe request was: {echoed}"
        elif kind == "refuse":
            message = "x" * 320 + f" key {auth} was refused; request: {echoed}"
            return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=400)
        else:  # the gateway: answers, quoting what it was sent (its own user and password are not in the request)
            content = f"ANSWER: 1 ({echoed} via {request.url})"
        return web.json_response({"id": "x", "object": "chat.completion", "model": kind, "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}],
                                  "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}})  # fmt: skip

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def _all_values(path: Path) -> str:
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'").fetchall()]
        return "\n".join(str(con.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)
    finally:
        con.close()


def test_no_piece_of_the_key_or_a_password_is_stored_or_reported(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ECHO_TEST_KEY", KEY)
    seen: list[str] = []
    out = tmp_path / "r.duckdb"
    with app_in_thread(lambda: _echoing_server(seen)) as port:
        url = f"http://127.0.0.1:{port}/v1"
        fast = {"api_key_env": "ECHO_TEST_KEY", "timeout": 10, "retry_backoff_s": 0.01, "retry_backoff_max_s": 0.05, "max_retries": 1}
        models = [{"name": name, **fast, "base_url": url} for name in ("proxy", "refuse")]
        # a gateway taking a user and password in its URL (sent as Basic auth): stored in runs.config, named in messages
        models.append({"name": "gateway", **fast, "api_key_env": None, "base_url": f"http://gw-user:{PASSWORD}@127.0.0.1:{port}/v1"})
        config = {"out": str(out), "envs": ["echo"], "split": "dev", "limit": 2, "models": models,
                  "env_options": {"echo": {}}}  # fmt: skip
        (tmp_path / "run.yaml").write_text(json.dumps(config), encoding="utf-8")
        main(["run", "--no-progress", "--config", str(tmp_path / "run.yaml")])
    assert any(KEY in s for s in seen), "the server never received the key: nothing was tested"
    printed = capsys.readouterr()
    stored = _all_values(out)
    assert "***" in stored and "refused" in stored  # the echoes reached the engine, the key in them masked
    assert main(["report", str(out), "--html", str(tmp_path / "report.html")]) == 0
    report = capsys.readouterr().out
    assert main(["view", "--export", str(tmp_path / "site"), str(out)]) == 0
    exported = b"".join(p.read_bytes() for p in sorted((tmp_path / "site").rglob("*")) if p.is_file())
    places = {"result file (bytes)": out.read_bytes(), "result file (values)": stored, "run output": printed.out + printed.err,
              "report": report, "HTML report": (tmp_path / "report.html").read_bytes(), "export": exported}  # fmt: skip
    assert len(exported) > 1000 and "proxy" in report
    leaks = {place: _leaks(text) for place, text in places.items() if _leaks(text)}
    assert not leaks, leaks


def test_a_password_with_a_hash_is_not_printed(capsys, tmp_path):
    """``--db-url`` with a ``#`` in the password: the error line masks all of it and names the fix (a URL parser would
    have read the host as ``root`` and the port as the password's start)."""
    argv = ["run", "--no-progress", "--env", "db", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
            "--db-url", f"mysql://root:{DB_PASSWORD}@127.0.0.1:3306/", "--out", str(tmp_path / "r.duckdb")]  # fmt: skip
    assert main(argv) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith("error: db: option db_url='mysql://***@127.0.0.1:3306/' has a '#' in its user or password") and "%23" in line, line
    assert not _leaks(line), line


def test_a_cut_made_before_redaction_leaves_no_piece():
    """What the redaction does to text a step cut first: the key's start or end of 8+ characters is masked too."""
    redactor = Redactor()
    redactor.register(KEY)
    for text in (f"{'x' * 290} {KEY}"[:300], f"...{KEY[-12:]} tail", f"error: {KEY}.", f"{KEY}{KEY}"):
        assert not _leaks(redactor.text(text)), text
    assert redactor.text("sk-proj alone, nothing of the key") == "sk-proj alone, nothing of the key"
    assert re.fullmatch(r"x+ \*\*\*", redactor.text(f"{'x' * 290} {KEY}"[:300]))


def test_what_a_run_prints_is_redacted(capsys):
    """The console a run prints on (progress, warnings, end-of-run lines, whatever their source) masks the secrets."""
    from agentbench_async import cli
    from agentbench_async.redaction import register

    register(KEY)
    cli._err.print(f"warning: closing db failed: access denied for key {KEY}", markup=False, soft_wrap=True)
    err = capsys.readouterr().err
    assert "access denied for key ***" in err and not _leaks(err), err


def test_a_proxy_password_from_the_environment_is_a_secret(monkeypatch):
    """HTTPS_PROXY with a user and password (read as the SDKs read it): its password is masked wherever it appears."""
    from agentbench_async.models.network import route
    from agentbench_async.redaction import redact

    monkeypatch.setenv("HTTPS_PROXY", f"http://proxy-user:{PASSWORD}@127.0.0.1:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert route("https://api.example.com/v1").proxy == "http://127.0.0.1:3128"
    assert redact(f"407 from the proxy: bad credentials proxy-user:{PASSWORD}") == "407 from the proxy: bad credentials ***"
