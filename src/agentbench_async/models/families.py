"""Provider conventions the SDKs have, so a model configured the way its provider's SDK taught works here too.

- OpenAI's reasoning models — the o-series (``o1``, ``o3``, ``o4-mini``, ...) and GPT-5 (``gpt-5``, ``gpt-5-mini``,
  ``gpt-5.1``, ...), with their dated and size variants, as OpenAI's model pages name them — take
  ``max_completion_tokens`` (not ``max_tokens``) and only their default temperature, on OpenAI's API and behind
  any gateway (OpenRouter, LiteLLM, a company proxy). Recognised by name (a gateway's ``openai/`` prefix
  ignored), as LiteLLM and inspect_ai do. ``gpt-5-chat-latest`` and its kin are chat models, not reasoning
  models. A name not recognised still works: the client adapts once when the server refuses (``base.py``).
- Anthropic's SDK takes the host root as its base URL (``https://api.anthropic.com``) and adds ``/v1/messages``;
  the engine's own form ends in ``/v1``. Both are accepted.
- The key and base URL come from the variables the SDKs read when a client is given none (``OPENAI_API_KEY``,
  ``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``; Azure OpenAI: ``AZURE_OPENAI_API_KEY``,
  ``AZURE_OPENAI_ENDPOINT``, ``OPENAI_API_VERSION``); a variable named in ``api_key_env`` and a ``base_url`` given win.
- Azure OpenAI (the SDK's ``AzureOpenAI``): ``{endpoint}/openai/deployments/{model}/chat/completions?api-version=V``
  with the key in an ``api-key`` header. A base URL with a query keeps it after the path the engine adds.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlencode, urlsplit, urlunsplit

from ..bounds import check_http_url
from ..errors import ConfigError

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
    the config sets, which always win): ``max_completion_tokens``, and no temperature. Anthropic: no temperature
    unless the config sets one (anthropic-sdk-python 0.121.0's ``messages.create`` sends none unless asked)."""
    if config.provider == "anthropic" and "temperature" not in given:
        config.temperature = None
    if config.provider not in ("openai", "azure") or not is_openai_reasoning_model(config.model_id):
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


# provider -> (the key's variable, the base URL's variable) its SDK reads when the client is given none
SDK_VARIABLES = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "azure": ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT"),
}
AZURE_API_VERSION_VARIABLE = "OPENAI_API_VERSION"
# the hosts whose APIs refuse a request without a key: no key there is refused before the run starts
_KEYED_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}


def apply_sdk_environment(config: ModelConfig, given: Mapping[str, object], where: str, environ: Mapping[str, str] | None = None) -> None:
    """The key variable, base URL (and Azure's API version) the provider's SDK takes from the environment where the
    config names none (``given``: the fields the config sets, which win); Azure without endpoint/key/version refused."""
    env = os.environ if environ is None else environ
    key_var, url_var = SDK_VARIABLES.get(config.provider, (None, None))
    if key_var and given.get("api_key_env") is None and env.get(key_var):
        config.api_key_env = key_var
    if url_var and given.get("base_url") is None and env.get(url_var):
        config.base_url = env[url_var]
        if not config.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}.base_url: ${url_var} is {config.base_url!r}, not an http(s) URL")
        check_http_url(config.base_url, f"{where}.base_url (${url_var})")
    if config.provider == "azure":
        if config.api_version is None and env.get(AZURE_API_VERSION_VARIABLE):
            config.api_version = env[AZURE_API_VERSION_VARIABLE]
        for field_name, missing in (("base_url", f"no Azure endpoint: set base_url (https://RESOURCE.openai.azure.com) or export {url_var}"),
                                    ("api_version", f"no API version: set api_version (e.g. 2024-10-21) or export {AZURE_API_VERSION_VARIABLE}"),
                                    ("api_key_env", f"no key: export {key_var} or name the key's variable in api_key_env")):  # fmt: skip
            if not getattr(config, field_name):
                raise ConfigError(f"{where}.{field_name}: {missing} (as the openai SDK's AzureOpenAI requires)")
    elif config.api_version is not None:
        raise ConfigError(f"{where}.api_version: is Azure OpenAI's api-version; set provider: azure, or remove it")


def check_key(config: ModelConfig, where: str) -> None:
    """Before a run writes anything: the named key variable is set, and a provider's public host (which refuses
    every request without a key) has one."""
    key_var = SDK_VARIABLES.get(config.provider, (None, None))[0]
    if config.api_key_env is None and key_var:
        host = urlsplit(config.base_url).hostname if config.base_url else _KEYED_HOSTS.get(config.provider)
        if host == _KEYED_HOSTS.get(config.provider):
            raise ConfigError(f"{where}: {host} needs an API key: export {key_var} (read as the {config.provider} SDK does) "
                              "or name the key's variable with --api-key-env / api_key_env")  # fmt: skip
    config.api_key(where)


def join_url(base_url: str, path: str, query: Mapping[str, str] | None = None) -> str:
    """``path`` appended to ``base_url``'s path, its query kept after it (an Azure-style
    ``...?api-version=V`` base URL), with ``query`` added."""
    parts = urlsplit(base_url)
    extra = urlencode(dict(query)) if query else ""
    q = "&".join(x for x in (parts.query, extra) if x)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path, query=q))


def azure_deployment_root(base_url: str, deployment: str) -> str:
    """The deployment's root as the openai SDK's ``AzureOpenAI`` builds it: an endpoint (nothing after the host) gets
    ``/openai/deployments/{deployment}``; a base URL with ``/openai`` gets ``/deployments/{deployment}``; one already
    naming a deployment is used as it is."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if "/deployments" in path:
        return base_url
    if not path:
        path = "/openai"
    return urlunsplit(parts._replace(path=f"{path}/deployments/{deployment}"))
