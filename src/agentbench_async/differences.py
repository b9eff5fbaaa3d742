"""What tells stored run configurations apart, in the words the user set them with.

One rule serves the report's configuration labels, ``compare`` and the refusal of a resume with another config:
a run's deciding settings (``settings_of``) are named as the user set them (``max_tokens``, ``history``,
``kg.data``, ``card_game.acknowledgement``), each either run-wide or scoped to one environment (its data, prompts and
options, the ltp judge). An environment-scoped setting counts only between runs that both played that environment,
so a run of ``db,os`` is never told apart from a run of every environment by kg's data or webshop's prompts
(``differing``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from .envs.base import ENV_FILE
from .settings import env_data_dir, env_deviations, env_result_options, official_tasks

DEFAULT = "default"  # the printed value of a setting a run did not set
SHORT = 40  # characters of a value a label shows; the full text is in the settings table (report) or on hover (view)
_RUN_WIDE = ("history", "action_mode", "split", "seed")
_JUDGE_FIELDS = ("temperature", "max_tokens", "extra_body")

Settings = dict[str, tuple[str | None, str]]  # setting -> (the environment it concerns, None: every one; printed value)


def _printed(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str) if isinstance(value, (dict, list)) else str(value)


def deciding_model_fields(model: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a model's config (``ModelConfig`` fields, or a stored ``runs.config`` models entry) that decide
    its results: they are in the run's fingerprint, and reports tell configurations apart by them."""
    decisive = {k: model.get(k) for k in ("name", "provider", "model", "temperature", "max_tokens", "extra_body", "context_window")}
    # reasoning settings count only when set, so files written before they existed still resume
    decisive.update({k: model[k] for k in ("max_tokens_param", "reasoning_effort", "thinking") if model.get(k) is not None})
    if model.get("reasoning_handling", "separate") != "separate":
        decisive["reasoning_handling"] = model["reasoning_handling"]
    return decisive


def _model_fields(entry: Mapping[str, Any]) -> dict[str, str]:
    """A stored models entry's deciding fields that are set (its name left out)."""
    fields = deciding_model_fields(entry)
    return {k: _printed(v) for k, v in fields.items() if k != "name" and v not in (None, {}, "")}


def _models(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [m for m in config.get("models") or [] if isinstance(m, dict)]


def settings_of(config: Mapping[str, Any], envs: Iterable[str], model: str | None = None, *, model_fields: bool = True) -> Settings:
    """The settings that decide results of a run with this stored config (``runs.config``) on ``envs`` (the environments
    it played): the run-wide ones, ``model``'s own fields (None: every model's, named ``NAME max_tokens`` when the run
    has several, and which models ran), and per environment its data (``ENV.data``), options and own differences from
    AgentBench v0.2, and for ltp the judge. Without ``model_fields`` the models' own settings are left out (two models
    compared: they differ by design)."""
    config, envs = dict(config), list(envs)
    out: Settings = {key: (None, _printed(config.get(key))) for key in _RUN_WIDE if key in config}
    models = _models(config)
    chosen = [m for m in models if model_fields and (model is None or m.get("name") == model)]
    for entry in chosen:
        prefix = "" if model is not None or len(models) == 1 else f"{entry.get('name')} "
        out.update({f"{prefix}{key}": (None, value) for key, value in _model_fields(entry).items()})
    if model is None and model_fields:
        out["models"] = (None, ", ".join(sorted(str(m.get("name")) for m in models)))
    options = config.get("env_options") or {}
    for env in envs:
        if "data_dir" in config:
            out[f"{env}.data"] = (env, "official" if official_tasks(env, config) else "built-in")
        mine = {k: v for k, v in (options.get(env) or {}).items() if k != ENV_FILE}  # where a file was is no setting: its code is
        for key, upstream in env_result_options(env).items():
            value = mine.pop(key, upstream)
            if value is not None:
                out[f"{env}.{key}"] = (env, _printed(value))
        out.update({f"{env}.{key}": (env, _printed(value)) for key, value in mine.items()})
        out.update({d.setting: (env, d.value) for d in env_deviations(env, config)})
    judge = config.get("judge")
    if "ltp" in envs:
        judge = judge if isinstance(judge, dict) else {}
        out["judge"] = ("ltp", str(judge.get("model") or judge.get("name") or "none"))
        out.update({f"judge {k}": ("ltp", _printed(judge[k])) for k in _JUDGE_FIELDS if judge.get(k) not in (None, {})})
    return out


def differing(settings: Mapping[str, Settings], played: Mapping[str, Collection[str]]) -> dict[str, str | None]:
    """The settings whose values are not the same in all of ``settings`` (config -> its settings), each with the
    environment it concerns: a run-wide one between every config (unset: ``default``), an environment's only between
    the configs that played it. Run-wide settings first, then the models', then the environments'."""
    scopes = {k: scope for s in settings.values() for k, (scope, _) in s.items()}
    out: dict[str, str | None] = {}
    for key, scope in sorted(scopes.items(), key=lambda item: (item[1] is not None, item[0] not in _RUN_WIDE, item[0])):
        values = {s[key][1] if key in s else DEFAULT for cid, s in settings.items() if scope is None or scope in played[cid]}
        if len(values) > 1:
            out[key] = scope
    return out


def short(value: str, limit: int = SHORT) -> str:
    """``value`` cut to ``limit`` characters (an ellipsis says so)."""
    return value if len(value) <= limit else value[: limit - 1].rstrip() + "…"


def value_of(settings: Settings, key: str) -> str:
    return settings[key][1] if key in settings else DEFAULT


def described(settings: Settings, keys: Mapping[str, str | None], played: Collection[str], *, cut: bool = True) -> str:
    """``key: value, ...`` for ``keys`` (``differing``) that concern what this config played (values cut to ``SHORT``
    unless not ``cut``)."""
    parts = []
    for key, scope in keys.items():
        if scope is None or scope in played:
            value = value_of(settings, key)
            parts.append(f"{key}: {short(value) if cut else value}")
    return ", ".join(parts)


def changes(a: Settings, b: Settings, envs_a: Collection[str], envs_b: Collection[str], words: str = "{a} vs {b}") -> list[str]:
    """``setting: A vs B`` (or ``words``) for each setting ``a`` and ``b`` differ in (``differing``)."""
    keys = differing({"a": a, "b": b}, {"a": envs_a, "b": envs_b})
    return [f"{k}: " + words.format(a=short(value_of(a, k)), b=short(value_of(b, k))) for k in keys]


def config_changes(stored: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """``max_tokens: 256 in the file, 128 now`` for each deciding setting a stored run's config and this run's differ in
    (environment settings only for the environments both name)."""
    envs_then, envs_now = list(stored.get("envs") or []), list(now.get("envs") or [])
    return changes(settings_of(stored, envs_then), settings_of(now, envs_now), envs_then, envs_now, "{a} in the file, {b} now")
