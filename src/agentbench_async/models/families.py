"""Provider conventions the SDKs have, so a model configured the way its provider's SDK taught works here too.

- OpenAI's reasoning models — the o-series (``o1``, ``o3``, ``o4-mini``, ...) and GPT-5 (``gpt-5``, ``gpt-5-mini``,
  ``gpt-5.1``, ...), with their dated and size variants, as OpenAI's model pages name them — take
  ``max_completion_tokens`` (not ``max_tokens``) and only their default temperature, on OpenAI's API and behind
  any gateway (OpenRouter, LiteLLM, a company proxy). Recognised by name (a gateway's ``openai/`` prefix
  ignored), as LiteLLM and inspect_ai do. ``gpt-5-chat-latest`` and its kin are chat models, not reasoning
  models. A name not recognised still works: the client adapts once when the server refuses (``base.py``).
- Anthropic's SDK takes the host root as its base URL (``https://api.anthropic.com``) and adds ``/v1/messages``;
  the engine's own form ends in ``/v1``. Both are accepted.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from .base import ModelConfig

# The request fields a client may adapt once when a server refuses them, if the config leaves them to the engine.
ADAPTABLE = ("max_tokens_param", "temperature")
_REASONING = re.compile(r"^(o[1-9][0-9]*|gpt-5(\.[0-9]+)?)(-|$)")
_CHAT = re.compile(r"^gpt-5(\.[0-9]+)?-chat(-|$)")


def is_openai_reasoning_model(model_id: str) -> bool:
    """Whether ``model_id`` names an OpenAI reasoning model (``o3-mini``, ``gpt-5-2025-08-07``, ``openai/gpt-5-mini``)."""
    name = model_id.rsplit("/", 1)[-1].strip().lower()
    return bool(_REASONING.match(name)) and not _CHAT.match(name)


def apply_family_defaults(config: ModelConfig, given: Collection[str]) -> None:
    """An OpenAI reasoning model's request fields, where the config leaves them to the engine (``given``: the fields
    the config sets, which always win): ``max_completion_tokens``, and no temperature."""
    if config.provider != "openai" or not is_openai_reasoning_model(config.model_id):
        return
    if "max_tokens_param" not in given:
        config.max_tokens_param = "max_completion_tokens"
    if "temperature" not in given:
        config.temperature = None


def anthropic_api_root(base_url: str) -> str:
    """The Messages API root for a base URL in either form: the SDK's host root (``/v1`` added, as the SDK does) or
    one that already ends in ``/v1``."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit(parts._replace(path=path))
