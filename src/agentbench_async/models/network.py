"""How every client of the engine reaches a server: model clients, the judge, the KG endpoint client and
``data pull``.

Like the SDKs users know (openai, anthropic, httpx), they honour the environment:

- ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY`` (and proxy credentials from ``~/.netrc``), read with
  aiohttp's own ``trust_env`` rules. They are resolved once per server when its session is made, not on
  every request as ``trust_env=True`` would (that re-reads the environment and ``~/.netrc`` per call);
  a run's environment does not change while it runs, so the result is the same.
- ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``: OpenSSL's default verify paths, which ``ssl.create_default_context``
  loads.

A model's ``proxy`` field overrides the environment for that model (``NO_PROXY`` then does not apply);
``ca_bundle`` (a PEM file) adds certificate authorities to the default ones, e.g. a company's TLS-inspecting
proxy.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from ..bounds import redact_url, url_problem
from ..errors import ConfigError
from ..redaction import register


@dataclass(frozen=True)
class Route:
    """The proxy (or none) and TLS settings for requests to one server."""

    proxy: str | None
    proxy_auth: aiohttp.BasicAuth | None
    # True for an http:// server without a ca_bundle: aiohttp's own default verifying context (made when aiohttp is
    # imported), used only should a redirect lead to https; loading the CA store again costs ~50 ms of CPU per client
    ssl: ssl.SSLContext | bool


def ssl_context(ca_bundle: str | Path | None = None, *, where: str = "ca_bundle") -> ssl.SSLContext:
    """The default verifying context (honours SSL_CERT_FILE/SSL_CERT_DIR), plus ``ca_bundle`` if given."""
    context = ssl.create_default_context()
    if ca_bundle:
        try:
            context.load_verify_locations(cafile=str(ca_bundle))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{where}: {ca_bundle} is not a readable PEM file of CA certificates ({exc})") from None
    return context


def route(url: str, *, proxy: str | None = None, ca_bundle: str | Path | None = None, where: str = "proxy") -> Route:
    """Decide once how to reach ``url``: the explicit ``proxy``, else what HTTP(S)_PROXY/NO_PROXY say."""
    if proxy:
        if not proxy.startswith("http://"):
            raise ConfigError(f"{where}: {redact_url(proxy)!r} is not an http:// proxy URL (aiohttp speaks to proxies over http)")
        if url_problem(proxy) is not None:
            raise ConfigError(f"{where}: {redact_url(proxy)!r} {url_problem(proxy)}; write it as http://HOST:PORT")
        return Route(proxy, None, _tls(url, ca_bundle, where))
    try:
        env_proxy, auth = get_env_proxy_for_url(URL(url))
    except LookupError:  # no proxy for this scheme, or the host is in NO_PROXY
        env_proxy, auth = None, None
    if auth is not None:  # HTTPS_PROXY=http://user:password@host: the password is a secret of the run's (redaction.py)
        register(auth.password)
        register(f"{auth.login}:{auth.password}")
    return Route(str(env_proxy) if env_proxy else None, auth, _tls(url, ca_bundle, where))


def _tls(url: str, ca_bundle: str | Path | None, where: str) -> ssl.SSLContext | bool:
    if ca_bundle is None and urlsplit(url).scheme == "http":
        return True
    return ssl_context(ca_bundle, where=where.replace("proxy", "ca_bundle"))


def client_session(target: Route, *, limit: int = 100, timeout: aiohttp.ClientTimeout | None = None, **connector: Any) -> aiohttp.ClientSession:
    """A session whose connector verifies TLS with ``target.ssl``; pass ``target.proxy`` to each request
    (``request_kwargs``)."""
    conn = aiohttp.TCPConnector(limit=limit, ssl=target.ssl, **connector)
    return aiohttp.ClientSession(connector=conn, timeout=timeout or aiohttp.ClientTimeout(total=None))


def request_kwargs(target: Route) -> dict[str, Any]:
    """The per-request arguments that send a request through the route's proxy (empty when direct)."""
    if target.proxy is None:
        return {}
    return {"proxy": target.proxy, "proxy_auth": target.proxy_auth} if target.proxy_auth else {"proxy": target.proxy}

