"""kg over HTTP: a real Virtuoso (Debian ``virtuoso-opensource``) started here on loopback and loaded with
the built-in graph gives the same observations and answers as the embedded pyoxigraph store; a
failing endpoint is ``env_error`` / a clear start-up error, never a crash."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest
from aiohttp import web

from agentbench_async.envs import EpisodeContext, make_env
from agentbench_async.envs.kg import KGEnvironment
from agentbench_async.envs.kg.tasks import builtin_dir
from agentbench_async.envs.kg.backends import HttpSparqlBackend
from agentbench_async.errors import ConfigError, EnvError, EnvUnavailableError
from agentbench_async.testing import play
from agentbench_async.types import ModelReply
from support import require

GRAPH_IRI = "http://agentbench.local/kg"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_INI = """\
[Database]
DatabaseFile = {db}/virtuoso.db
ErrorLogFile = {db}/virtuoso.log
LockFile = {db}/virtuoso.lck
TransactionFile = {db}/virtuoso.trx
xa_persistent_file = {db}/virtuoso.pxa
TempStorage = TempDatabase
[TempDatabase]
DatabaseFile = {db}/virtuoso-temp.db
TransactionFile = {db}/virtuoso-temp.trx
[Parameters]
ServerPort = 127.0.0.1:{sql_port}
DisableUnixSocket = 1
DirsAllowed = ., {data}
NumberOfBuffers = 2000
MaxDirtyBuffers = 1200
CheckpointInterval = 0
[HTTPServer]
ServerPort = 127.0.0.1:{http_port}
ServerThreads = 4
[SPARQL]
ResultSetMaxRows = 10000
MaxQueryExecutionTime = 60
"""


@pytest.fixture(scope="module")
def virtuoso_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server, isql = shutil.which("virtuoso-t"), shutil.which("isql-vt") or shutil.which("isql")
    require(bool(server and isql), "Virtuoso is not installed (apt-get install virtuoso-opensource)")
    root = tmp_path_factory.mktemp("virtuoso")
    db, data = root / "db", root / "data"
    db.mkdir()
    data.mkdir()
    shutil.copy(builtin_dir() / "graph.nt", data / "graph.nt")
    sql_port, http_port = _free_port(), _free_port()
    ini = root / "virtuoso.ini"
    ini.write_text(_INI.format(db=db, data=data, sql_port=sql_port, http_port=http_port), encoding="utf-8")
    log = open(root / "stdout.log", "wb")
    proc = subprocess.Popen([str(server), "-f", "-c", str(ini)], cwd=root, stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{http_port}/sparql"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"virtuoso-t exited with {proc.returncode}: {(root / 'stdout.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(endpoint + "?query=ASK%20%7B%7D", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("virtuoso-t did not open its HTTP port within 60 s")
                time.sleep(0.2)
        load = f"ld_dir('{data}', 'graph.nt', '{GRAPH_IRI}'); rdf_loader_run(); checkpoint;"
        out = subprocess.run([str(isql), f"127.0.0.1:{sql_port}", "dba", "dba", f"exec={load}"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "Error" not in out.stdout + out.stderr, out.stdout + out.stderr
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


async def _started(**options: object) -> KGEnvironment:
    env = make_env("kg", options=dict(options))
    await env.start()
    return env  # type: ignore[return-value]


def _observations(record) -> list[str]:  # type: ignore[no-untyped-def]
    return [row.content or "" for row in record.turns if row.role in ("user", "tool")]


async def test_same_questions_same_answers_through_both_backends(virtuoso_endpoint: str) -> None:
    embedded = await _started()
    remote = await _started(kg_endpoint=virtuoso_endpoint)
    try:
        assert "SPARQL endpoint" in remote.backend_description
        for split in ("dev", "test"):
            for task in embedded.tasks(split):
                a = await play(embedded, task, "oracle")
                b = await play(remote, task, "oracle")
                assert (b.status, b.score) == ("completed", 1.0), (task.data["question"], b.error, b.details)
                assert sorted(a.details["predicted"]) == sorted(b.details["predicted"]) == task.data["gold"]
                assert _observations(a) == _observations(b), task.data["question"]
        task = next(t for t in remote.tasks("test") if t.data["source"] == "builtin:superlative_combined")
        record = await play(remote, task, "oracle", action_mode="tools")
        assert record.score == 1.0
    finally:
        await embedded.close()
        await remote.close()


async def test_weak_policy_through_the_endpoint(virtuoso_endpoint: str) -> None:
    remote = await _started(kg_endpoint=virtuoso_endpoint)
    try:
        statuses = {(await play(remote, task, "weak")).status for task in remote.tasks("dev")}
        assert statuses == {"completed", "task_limit_exceeded", "context_limit_exceeded"}
    finally:
        await remote.close()


async def test_unreachable_endpoint_is_a_clear_startup_error() -> None:
    env = make_env("kg", options={"kg_endpoint": f"http://127.0.0.1:{_free_port()}/sparql"})
    with pytest.raises(EnvUnavailableError, match="not usable"):
        await env.start()
    with pytest.raises(ConfigError, match="must be a URL starting with http:// or https://"):  # a user's mistake
        await make_env("kg", options={"kg_endpoint": "file:///etc/passwd"}).start()


async def test_an_endpoint_answer_past_the_bound_is_env_error_and_not_read(monkeypatch) -> None:
    """Issue 37: an endpoint's answer is read at most ``max_reply_bytes`` (64 MiB), as a model's reply; one streaming on
    is cut, the episode an env_error naming the bound, never the whole answer in memory."""
    sent: list[int] = []

    async def sparql(request: web.Request) -> web.StreamResponse:
        await request.post()
        resp = web.StreamResponse(headers={"Content-Type": "application/sparql-results+json"})
        await resp.prepare(request)
        written = 0
        try:
            while written < 256 << 20:
                await resp.write(b" " * (64 << 10))
                written += 64 << 10
        except (ConnectionError, RuntimeError):
            pass
        sent.append(written)
        return resp

    monkeypatch.setattr(HttpSparqlBackend, "max_reply_bytes", 1 << 20)
    app = web.Application()
    app.router.add_post("/sparql", sparql)
    runner = web.AppRunner(app)
    await runner.setup()
    port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    backend = HttpSparqlBackend(f"http://127.0.0.1:{port}/sparql")
    try:
        with pytest.raises(EnvError, match=r"larger than the 1,048,576-byte cap \(more than 1,048,576 bytes sent\); not read further"):
            await backend.select("SELECT ?x WHERE { ?x ?p ?o }")
    finally:
        await backend.close()
        await runner.cleanup()
    assert sent and sent[0] < 64 << 20, sent


async def test_endpoint_failures_during_an_episode() -> None:
    """A query the endpoint rejects is 'cannot be executed'; an endpoint that goes away is env_error."""
    mode = {"reject": False}

    async def sparql(request: web.Request) -> web.Response:
        form = await request.post()
        if mode["reject"]:
            return web.Response(status=400, text="Virtuoso 37000 Error SP030: SPARQL compiler: bad query")
        query = str(form["query"])
        rows = [] if "VALUES" not in query else [{"x": {"type": "literal", "value": "1"}}]
        if "?x0 ?x1" in query:
            rows = [{"x0": {"type": "uri", "value": "http://rdf.freebase.com/ns/film.director.film"}}]
        return web.json_response({"head": {"vars": ["x0" if "?x0 ?x1" in query else "x"]}, "results": {"bindings": rows}})

    app = web.Application()
    app.router.add_post("/sparql", sparql)
    runner = web.AppRunner(app)
    await runner.setup()
    port = _free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    env = await _started(kg_endpoint=f"http://127.0.0.1:{port}/sparql")
    try:
        task = next(t for t in env.tasks("dev") if t.data["actions"][0].startswith("get_relations"))
        session = await env.open_session(task, EpisodeContext(episode_id="e"))
        await session.begin()
        entity = next(iter(task.data["entities"]))
        step = await session.step(ModelReply(content=f"Action: get_relations({entity})"))
        assert step.observation[0]["content"] == "Observation: [film.director.film]"
        mode["reject"] = True
        step = await session.step(ModelReply(content=f"Action: get_relations({entity})"))
        assert not step.valid and "cannot be executed" in step.observation[0]["content"]
        await runner.cleanup()  # the endpoint goes away
        record = await play(env, task, "oracle")
        assert record.status == "env_error" and "unreachable" in (record.error or "")
    finally:
        await env.close()
        await runner.cleanup()
