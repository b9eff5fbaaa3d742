"""Issue 37, items 6 and 7: bounds on what is read from outside and one line for bad input.

A model server's response body is read a chunk at a time up to ``max_response_bytes``: a server streaming far more
(as the issue's 500 MB body, which the engine read whole) ends that call as a model_error naming the cap, the rest is
never read. A config file is read at most 4 MiB (``--config /dev/zero`` ends at once) and at most 64 levels deep.
Every bad input of the issue (a URL that does not parse, a port out of range, a folder that cannot be made, a config
that is not UTF-8) is one ``error:`` line naming the input and the fix, exit 2, no traceback, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from aiohttp import web
from engine_support import echo_config, query, run, serve_app

from agentbench_async.bounds import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH
from agentbench_async.cli import main

CAP = 1 << 20  # the test's max_response_bytes: 1 MiB
SENT_AT_MOST = 256 << 20  # what the hostile server would send if let: 256 MiB


def _hostile_server(sent: list[int], *, declare: bool) -> web.Application:
    """A chat-completions endpoint answering 200 with a body of SENT_AT_MOST bytes, streamed in 64 KiB chunks (a
    Content-Length of it with ``declare``, else chunked); ``sent`` gets the bytes written before the client left."""
    chunk = b" " * (64 << 10)

    async def answer(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        if declare:
            resp.content_length = SENT_AT_MOST
        await resp.prepare(request)
        written = 0
        try:
            while written < SENT_AT_MOST:
                await resp.write(chunk)
                written += len(chunk)
        except (ConnectionResetError, ConnectionError, RuntimeError):
            pass  # the client closed the connection
        finally:
            sent.append(written)
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    return app


@pytest.mark.parametrize("declare", [False, True], ids=["chunked", "content-length"])
async def test_a_body_past_the_cap_is_a_model_error_and_is_not_read(tmp_path, declare):
    sent: list[int] = []
    out = tmp_path / "big.duckdb"
    async with serve_app(_hostile_server(sent, declare=declare)) as port:
        cfg = echo_config(out, f"http://127.0.0.1:{port}/v1", limit=1,
                          models=[{"name": "m", "max_response_bytes": CAP, "max_retries": 3, "timeout": 60}])  # fmt: skip
        tracemalloc.start()
        try:
            summary = await run(cfg)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert summary.statuses == {"model_error": 1}
    (error,) = query(out, "SELECT error FROM episodes")[0]
    assert "larger than the 1,048,576-byte cap" in error and "raise max_response_bytes" in error, error
    calls = query(out, "SELECT http_status, error FROM model_calls")
    assert len(calls) == 1 and calls[0][0] == 200 and "1,048,576-byte cap" in calls[0][1]  # not retried: the same size again
    if declare:
        assert "Content-Length 268,435,456" in calls[0][1]
    # what was read stayed near the cap: the server could not hand over its 256 MiB, nor did the engine hold it
    assert sent and sent[0] < 64 << 20, f"the server wrote {sent[0]:,} bytes"
    assert peak < 48 << 20, f"peak traced memory {peak:,} bytes"


async def test_a_reply_under_the_cap_is_read_as_before(tmp_path):
    from engine_support import start_mock

    server = await start_mock()
    out = tmp_path / "ok.duckdb"
    try:
        summary = await run(echo_config(out, server.base_url, limit=3, models=[{"name": "mock-oracle", "max_response_bytes": 4096}]))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 3}


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def _deep_yaml(path: Path) -> Path:
    path.write_text("models: " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    return path


def _not_utf8(path: Path) -> Path:
    path.write_bytes(b"models:\n  - name: caf\xe9\n")  # Latin-1, as an editor set to it saves
    return path


RUN = ["run", "--no-progress", "--env", "echo", "--model", "mock-oracle"]
CASES = {  # argv (tmp as {tmp}) -> the words the one line must hold (the input, then the fix)
    "ipv6 base url": (RUN + ["--base-url", "http://[::1"], ["models[0].base_url", "'http://[::1'", "Invalid IPv6 URL",
                                                           "http://[::1]:8000/v1"]),  # fmt: skip
    "port in base url": (RUN + ["--base-url", "http://127.0.0.1:99999/v1"], ["base_url", "Port out of range 0-65535",
                                                                            "http(s)://HOST[:PORT]/PATH"]),  # fmt: skip
    "db url port": (RUN[:3] + ["db", *RUN[4:], "--base-url", "http://127.0.0.1:9/v1", "--db-url", "mysql://u:secret@h:99999/"],
                    ["db: option db_url='mysql://***@h:99999/'", "Port out of range", "mysql://HOST[:PORT]"]),
    "kg endpoint": (RUN[:3] + ["kg", *RUN[4:], "--base-url", "http://127.0.0.1:9/v1", "--kg-endpoint", "http://[::1/sparql"],
                    ["kg: option kg_endpoint=", "Invalid IPv6 URL", "http://HOST[:PORT]"]),
    "ray port": (RUN + ["--base-url", "http://127.0.0.1:9/v1", "--ray", "10.0.0.1:99999"],
                 ["ray.address: '10.0.0.1:99999' has port 99999, not a TCP port", "port 1-65535"]),
    "serve-mock -1": (["serve-mock", "--port", "-1"], ["serve-mock --port -1: not a TCP port", "give 1-65535 (0 picks a free one)"]),
    "serve-mock 99999": (["serve-mock", "--port", "99999"], ["serve-mock --port 99999: not a TCP port", "give 1-65535"]),
    "view 99999": (["view", "--port", "99999", "{tmp}/x.duckdb"], ["view --port 99999: not a TCP port", "give 1-65535"]),
    "data pull /proc": (["data", "pull", "--dest", "/proc/x"], ["data pull --dest /proc/x: cannot create the folder",
                                                               "give a folder you can write"]),  # fmt: skip
    "data pull url": (["data", "pull", "--dest", "{tmp}/d", "--base-url", "http://mirror:70000/"], ["data pull --base-url",
                                                                                                   "Port out of range"]),  # fmt: skip
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_naming_it_and_the_fix(capsys, tmp_path, case):
    argv, words = CASES[case]
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if argv[0] == "run":
        argv += ["--out", str(tmp_path / "r.duckdb")]
    assert main(argv) == 2
    line = _one_line(capsys)
    for word in words:
        assert word in line, (word, line)
    assert "secret" not in line
    assert not (tmp_path / "r.duckdb").exists() and not (tmp_path / "d").exists()


@pytest.mark.parametrize("make", [_deep_yaml, _not_utf8], ids=["100k-deep", "latin-1"])
def test_a_bad_config_file_is_one_line(capsys, tmp_path, make):
    path = make(tmp_path / "run.yaml")
    assert main(["run", "--config", str(path), "--out", str(tmp_path / "r.duckdb")]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"error: {path}: line {1 if make is _deep_yaml else 2} ")  # where the editor finds it
    if make is _deep_yaml:
        assert f"nests deeper than {MAX_CONFIG_DEPTH} mappings/lists" in line
    else:
        assert "is not UTF-8 (byte 0xe9)" in line and "save the config file as UTF-8" in line
        assert main(["run", "--config", str(path.with_name("none.yaml")), "--out", str(tmp_path / "r.duckdb")]) == 2
        assert "none.yaml: cannot read (No such file or directory)" in _one_line(capsys)
    assert not (tmp_path / "r.duckdb").exists()


def test_config_dev_zero_ends_at_once_with_bounded_memory(tmp_path):
    """Through the real entry point: one line at once, the process's peak memory that of Python with the package loaded
    (the issue's engine read 21.6 GB before the OOM killer fired)."""
    # started by a small Python of its own, which reports its peak memory (wait4): a child started by pytest itself
    # inherits pytest's peak as its own (the kernel carries the forking process's high-water mark across exec)
    measure = ("import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL); "
               "_, status, usage = os.wait4(p.pid, 0); print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)")  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "agentbench_async.cli", "run", "--config", "/dev/zero",
                           "--out", str(tmp_path / "r.duckdb")], capture_output=True, text=True, timeout=120)  # fmt: skip
    code, peak_kib = (int(x) for x in proc.stdout.split())
    assert code == 2 and time.monotonic() - started < 60
    assert proc.stderr.strip() == f"error: /dev/zero: larger than {MAX_CONFIG_BYTES >> 20} MiB, too big for a config file; " \
                                  "give the YAML file of the run's settings"  # fmt: skip
    assert peak_kib < 400_000, f"peak RSS {peak_kib:,} KiB"


def test_a_password_in_an_environment_url_is_not_stored(tmp_path):
    """--db-url / kg_endpoint with credentials: the run's stored settings (runs.config) keep the host, not the password."""
    from agentbench_async.config import build_config

    cfg = build_config({"out": tmp_path / "r.duckdb", "envs": ["db"], "models": [{"name": "mock-oracle", "base_url": "http://127.0.0.1:1/v1"}],
                        "env_options": {"db": {"db_url": "mysql://root:s3cret-pass@127.0.0.1:3306/agentbench"}}}, where="test")  # fmt: skip
    stored = str(cfg.public_dict())
    assert "s3cret-pass" not in stored and "mysql://***@127.0.0.1:3306/agentbench" in stored
    assert cfg.env_options["db"]["db_url"].endswith("s3cret-pass@127.0.0.1:3306/agentbench")  # the run itself still connects with it
