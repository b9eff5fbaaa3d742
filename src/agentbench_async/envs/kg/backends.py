"""The two transports for the same SPARQL text: embedded Oxigraph, or a SPARQL 1.1 HTTP endpoint.

Both return the values of the query's single projected variable, normalised like AgentBench
(namespace and ``-08:00`` removed). Failures are split in two:

* ``QueryFailed``: the store/endpoint answered but refused or could not finish this query (a model
  that asks for something too big on a full Freebase); the tool then reports "cannot be executed";
* ``EnvError``: the backend is gone (connection refused, endpoint down); the episode ends ``env_error``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from ...bounds import DEFAULT_MAX_RESPONSE_BYTES, BodyTooLarge, read_body
from ...environment import EnvError, EnvUnavailableError, client_session, request_kwargs, route
from .sparql import clean_value


class QueryFailed(Exception):
    """The backend rejected or could not finish one query."""


class SparqlBackend(Protocol):
    description: str

    async def select(self, query: str) -> list[str]:
        """Run a SELECT with one projected variable; return its values in result order."""
        ...

    async def close(self) -> None: ...


class OxigraphBackend:
    """An in-memory pyoxigraph store loaded once per run; queries run on a small thread pool, or in the caller's task
    for a store of at most ``inline_triples`` (the built-in graph's 1,399 answer in microseconds, and a worker thread's
    hop cost as much CPU as the queries themselves)."""

    inline_triples = 20_000

    def __init__(self, store: Any, description: str, workers: int = 2) -> None:
        self._store = store
        self.description = description
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kg-oxigraph")
        self._inline = len(store) <= self.inline_triples

    @classmethod
    async def load(cls, graph_files: list[Path]) -> OxigraphBackend:
        try:
            import pyoxigraph
        except ImportError:
            raise EnvUnavailableError("kg: the embedded backend needs pyoxigraph (pip install pyoxigraph), or pass --kg-endpoint URL") from None

        def _load() -> Any:
            store = pyoxigraph.Store()  # in memory
            for path in graph_files:
                fmt = pyoxigraph.RdfFormat.TURTLE if path.suffix == ".ttl" else pyoxigraph.RdfFormat.N_TRIPLES
                store.bulk_load(path=str(path), format=fmt)
            return store

        for path in graph_files:
            if not path.is_file():
                raise EnvUnavailableError(f"kg: graph file {path} does not exist")
        try:
            store = await asyncio.to_thread(_load)
        except (SyntaxError, ValueError, OSError) as exc:
            raise EnvUnavailableError(f"kg: cannot load graph {', '.join(map(str, graph_files))}: {exc}") from None
        return cls(store, "embedded pyoxigraph (" + ", ".join(p.name for p in graph_files) + ")")

    def _run(self, query: str) -> list[str]:
        solutions = self._store.query(query)
        return [clean_value(row[0].value) for row in solutions if row[0] is not None]

    async def select(self, query: str) -> list[str]:
        try:
            if self._inline:
                return self._run(query)
            return await asyncio.get_running_loop().run_in_executor(self._pool, self._run, query)
        except SyntaxError as exc:  # a bug in the builder, not the model's fault
            raise EnvError(f"kg: embedded store rejected a generated query: {exc}") from None
        except OSError as exc:
            raise EnvError(f"kg: embedded store failed: {exc}") from None

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class HttpSparqlBackend:
    """Any SPARQL 1.1 endpoint (Virtuoso with Freebase, Fuseki, Oxigraph server, …) over aiohttp."""

    max_reply_bytes = DEFAULT_MAX_RESPONSE_BYTES  # one answer read at most (as a model's reply); a larger one is env_error

    def __init__(self, url: str, *, timeout_s: float = 120.0, max_in_flight: int = 16) -> None:
        if not url.startswith(("http://", "https://")):
            raise EnvUnavailableError(f"kg: --kg-endpoint must be an http(s) URL, got {url!r}")
        self.url = url
        self.description = f"SPARQL endpoint {url}"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._limit = asyncio.Semaphore(max_in_flight)
        self._session: aiohttp.ClientSession | None = None
        # HTTP(S)_PROXY/NO_PROXY and SSL_CERT_FILE are honoured, as for the model clients (models/network.py)
        self._route = route(url, where="kg.kg_endpoint")

    async def check(self) -> None:
        """Fail fast at start-up when the endpoint is unreachable."""
        try:
            await self.select("SELECT ?x WHERE { VALUES ?x { 1 } }")
        except (EnvError, QueryFailed) as exc:
            raise EnvUnavailableError(f"kg: SPARQL endpoint {self.url} is not usable: {exc}") from None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = client_session(self._route, timeout=self._timeout)
        return self._session

    async def select(self, query: str) -> list[str]:
        headers = {"Accept": "application/sparql-results+json"}
        async with self._limit:
            try:
                async with self._client().post(self.url, data={"query": query}, headers=headers, **request_kwargs(self._route)) as resp:
                    try:
                        text = (await read_body(resp, self.max_reply_bytes)).decode("utf-8", "replace")  # SPARQL JSON is UTF-8
                    except BodyTooLarge as exc:
                        raise EnvError(f"kg: SPARQL endpoint {self.url}: {exc}; not read further") from None
                    if resp.status >= 500 and not text.strip():
                        raise EnvError(f"kg: SPARQL endpoint {self.url} answered HTTP {resp.status}")
                    if resp.status != 200:
                        raise QueryFailed(f"HTTP {resp.status}: {text.strip()[:300]}")
                    try:
                        payload = json.loads(text)
                    except ValueError:
                        raise QueryFailed(f"not SPARQL JSON results: {text[:200]!r}") from None
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                raise EnvError(f"kg: SPARQL endpoint {self.url} unreachable: {type(exc).__name__}: {exc}") from None
        try:
            names = payload["head"]["vars"]
            rows = payload["results"]["bindings"]
        except (KeyError, TypeError):
            raise QueryFailed(f"unexpected SPARQL JSON: {str(payload)[:200]}") from None
        if not names:
            return []
        name = names[0]
        return [clean_value(str(row[name]["value"])) for row in rows if name in row]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
