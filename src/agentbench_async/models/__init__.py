"""Model clients, one module per provider wire format."""

from __future__ import annotations

import aiohttp

from ..errors import ConfigError
from ..limits import ModelLimits, in_flight_cap
from .anthropic import AnthropicClient
from .base import ModelClient, ModelConfig, estimate_tokens
from .network import Route, client_session
from .openai import AzureOpenAIClient, OpenAIClient

PROVIDERS: dict[str, type[ModelClient]] = {"openai": OpenAIClient, "anthropic": AnthropicClient, "azure": AzureOpenAIClient}


def make_client(config: ModelConfig, session: aiohttp.ClientSession, limits: ModelLimits, target: Route | None = None) -> ModelClient:
    """A client for ``config`` over ``session``; ``target`` is the proxy route (``config.route()``)."""
    try:
        cls = PROVIDERS[config.provider]
    except KeyError:
        raise ConfigError(f"model {config.name!r}: unknown provider {config.provider!r} (use openai, anthropic or azure)") from None
    return cls(config, session, limits, target)


def open_client(config: ModelConfig, sessions: list[aiohttp.ClientSession], limits: ModelLimits | None = None) -> ModelClient:
    """A client with its own session (appended to ``sessions`` for closing), limits and route; ``limits``:
    limits held elsewhere (a distributed run's workers lease theirs from the run's broker)."""
    target = config.route()
    # the pool: one connection a request in flight, at most max_connections (a request beyond waits in the limits)
    pool = in_flight_cap(config.max_in_flight, config.max_connections)
    session = client_session(target, limit=pool, ttl_dns_cache=300, enable_cleanup_closed=True)
    sessions.append(session)
    if limits is None:
        limits = ModelLimits(max_in_flight=config.max_in_flight, rpm=config.rpm, tpm=config.tpm, window_s=config.rate_window_s,
                             max_connections=config.max_connections)  # fmt: skip
    return make_client(config, session, limits, target)


__all__ = ["PROVIDERS", "ModelClient", "ModelConfig", "ModelLimits", "estimate_tokens", "make_client", "open_client"]
