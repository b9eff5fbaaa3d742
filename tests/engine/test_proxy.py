"""Networks as users have them: HTTP(S)_PROXY, NO_PROXY, SSL_CERT_FILE, a per-model proxy and a CA bundle,
for the model clients, the KG endpoint client and ``data pull``, checked against a loopback forward proxy
started by the test (absolute-form HTTP requests and CONNECT tunnels) that records what went through it."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator

import pytest
import trustme
from aiohttp import web
from engine_support import echo_config, query, run, serve_app, start_mock

from agentbench_async.envs.kg.backends import HttpSparqlBackend
from agentbench_async.errors import ConfigError
from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.models.network import route

_PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy",
               "SSL_CERT_FILE", "SSL_CERT_DIR")  # fmt: skip


class ForwardProxy:
    """A small HTTP forward proxy: ``GET http://host/...`` is forwarded (one request per connection) and
    ``CONNECT host:port`` opens a tunnel. ``seen`` lists (method, target) of every request it handled."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._server: asyncio.base_events.Server | None = None
        self.url = ""

    async def start(self) -> ForwardProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, version = request_line.split(" ", 2)
        self.seen.append((method, target))
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            return
        # absolute-form: http://host:port/path -> origin-form to the server, one request per connection
        rest = target.split("://", 1)[1]
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.partition(":")
        headers = [h for h in header_lines if h and not h.lower().startswith(("proxy-", "connection:"))]
        length = next((int(h.split(":", 1)[1]) for h in headers if h.lower().startswith("content-length:")), 0)
        body = await reader.readexactly(length) if length else b""
        up_reader, up_writer = await asyncio.open_connection(host, int(port or 80))
        up_writer.write(f"{method} /{path} {version}\r\n".encode() + "\r\n".join([*headers, "Connection: close"]).encode()
                        + b"\r\n\r\n" + body)  # fmt: skip
        await up_writer.drain()
        await _pipe(up_reader, writer)
        up_writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


@pytest.fixture
async def proxy(monkeypatch) -> AsyncIterator[ForwardProxy]:
    for name in _PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    fwd = await ForwardProxy().start()
    yield fwd
    await fwd.stop()


def _through(fwd: ForwardProxy, port: int) -> list[tuple[str, str]]:
    return [(m, t) for m, t in fwd.seen if f":{port}" in t]


async def test_http_proxy_from_the_environment_carries_the_model_calls(tmp_path, proxy, monkeypatch):
    server = await start_mock()
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    try:
        summary = await run(echo_config(tmp_path / "p.duckdb", server.base_url, limit=2))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 2}
    assert len(_through(proxy, server.port)) == server.stats["requests"] == summary.calls == 3
    assert all(m == "POST" and t.startswith(f"http://127.0.0.1:{server.port}/v1/chat/completions") for m, t in proxy.seen)


async def test_no_proxy_hosts_are_reached_directly(tmp_path, proxy, monkeypatch):
    server = await start_mock()
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    try:
        summary = await run(echo_config(tmp_path / "n.duckdb", server.base_url, limit=2))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 2} and proxy.seen == []


async def test_a_mandatory_proxy_that_is_down_means_no_direct_connection(tmp_path, proxy, monkeypatch):
    server = await start_mock()
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    try:
        summary = await run(echo_config(tmp_path / "d.duckdb", server.base_url, models=[{"name": "mock-oracle", "max_retries": 0}], limit=1))
    finally:
        await server.stop()
    assert summary.statuses == {"model_error": 1} and server.stats["requests"] == 0


async def test_per_model_proxy_wins_over_the_environment_and_is_not_stored_with_credentials(tmp_path, proxy, monkeypatch):
    server = await start_mock()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    out = tmp_path / "m.duckdb"
    with_credentials = proxy.url.replace("http://", "http://user:hunter2@")
    try:
        summary = await run(echo_config(out, server.base_url, models=[{"name": "mock-oracle", "proxy": with_credentials}], limit=1))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 1} and len(_through(proxy, server.port)) == 1
    config = query(out, "SELECT config FROM runs")[0][0]
    assert "hunter2" not in config and "***@127.0.0.1" in config


async def test_kg_endpoint_client_goes_through_the_proxy(proxy, monkeypatch):
    async def sparql(request: web.Request) -> web.Response:
        return web.json_response({"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "literal", "value": "1"}}]}})

    app = web.Application()
    app.router.add_post("/sparql", sparql)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    async with serve_app(app) as port:
        backend = HttpSparqlBackend(f"http://127.0.0.1:{port}/sparql")
        try:
            assert await backend.select("SELECT ?x WHERE { VALUES ?x { 1 } }") == ["1"]
        finally:
            await backend.close()
    assert _through(proxy, port) == [("POST", f"http://127.0.0.1:{port}/sparql")]


async def test_data_pull_goes_through_the_proxy(tmp_path, proxy, monkeypatch, official_data_dir):
    from agentbench_async.data_pull import manifest, pull

    files = {f"/{f['commit']}/{f['repo_path']}": official_data_dir / f["path"] for f in manifest()}

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=files[request.path].read_bytes())

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    async with serve_app(app) as port:
        n = await pull(tmp_path / "data", base_url=f"http://127.0.0.1:{port}")
    assert n == len(files) and len(_through(proxy, port)) == len(files)


@pytest.fixture
async def tls_mock(tmp_path) -> AsyncIterator[tuple[MockModelServer, str, trustme.CA]]:
    """The mock model over HTTPS with a certificate from a throwaway CA (not trusted by the system)."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    server = MockModelServer(MockOptions())
    pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    async with serve_app(server.app(), ssl_context=context) as port:
        server.port = port
        yield server, str(pem), ca


async def test_tls_needs_the_ca_bundle_or_ssl_cert_file(tmp_path, tls_mock, proxy, monkeypatch):
    server, pem, _ = tls_mock
    base_url = f"https://127.0.0.1:{server.port}/v1"
    untrusted = await run(echo_config(tmp_path / "u.duckdb", base_url, models=[{"name": "mock-oracle", "max_retries": 0}], limit=1))
    assert untrusted.statuses == {"model_error": 1}
    assert "certificate" in query(tmp_path / "u.duckdb", "SELECT error FROM model_calls")[0][0].lower()

    bundled = await run(echo_config(tmp_path / "b.duckdb", base_url, models=[{"name": "mock-oracle", "ca_bundle": pem}], limit=1))
    assert bundled.statuses == {"completed": 1}

    monkeypatch.setenv("SSL_CERT_FILE", pem)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    via_env = await run(echo_config(tmp_path / "e.duckdb", base_url, limit=1))
    assert via_env.statuses == {"completed": 1}
    assert ("CONNECT", f"127.0.0.1:{server.port}") in proxy.seen, "HTTPS goes through the proxy as a CONNECT tunnel"


def test_the_ca_store_is_loaded_only_for_servers_reached_over_tls(tmp_path):
    # An http:// server gets aiohttp's default context (used only should a redirect lead to https): no ~50 ms of loading
    # the CA store per model client at start-up; https:// and a configured ca_bundle get their own, checked as before.
    assert route("http://127.0.0.1:8000/v1").ssl is True
    assert isinstance(route("https://api.openai.com/v1").ssl, ssl.SSLContext)
    ca = trustme.CA()
    pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    assert isinstance(route("http://127.0.0.1:8000/v1", ca_bundle=pem).ssl, ssl.SSLContext)
    (tmp_path / "bad.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match="bad.pem is not a readable PEM file"):
        route("http://127.0.0.1:8000/v1", ca_bundle=tmp_path / "bad.pem", where="model 'm'.proxy")
