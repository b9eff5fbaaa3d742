"""The run configuration: a YAML file (``--config``) and/or flags, validated with one-line errors."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any

import yaml

from .bounds import DEFAULT_MAX_RESPONSE_BYTES, check_http_url, load_yaml, read_config_text, redact_url, shown
from .differences import deciding_model_fields
from .distributed import RaySettings, ray_settings
from .envs import ENV_NAMES, available_envs, env_class, plugin_envs
from .envs.base import CODE, ENV_FILE
from .envs.code import code_of
from .envs.files import is_env_file, load_env_file
from .envs.files import loaded as loaded_env_file
from .envs.own_tasks import TASKS_FILE, TASKS_SHA256, merge_tasks_setting, settle_task_files
from .errors import AgentBenchError, ConfigError
from .history import POLICY_NAMES
from .models import PROVIDERS, ModelConfig
from .models.batches import batch_settings
from .models.families import ADAPTABLE, apply_family_defaults, apply_sdk_environment, check_key
from .redaction import SECRETS, register_url
from .settings import AGENTBENCH_HISTORY, DATA_DIR_SKIPPED, DEVIATIONS_KEY, EPISODE_LIMITS, deviations_json
from .spend import EpisodeLimits, cap_value, episode_limits

SPLIT_ALIASES = {"std": "test"}  # AgentBench's own name for the test split
ALL_ENVS = "all"  # --env all (or no --env): every built-in environment; --env all,NAME adds plugin NAME
_MODEL_FIELDS = {f.name: f for f in dataclasses.fields(ModelConfig) if f.name != "left_to_engine"}


@dataclass
class RunConfig:
    out: Path
    models: list[ModelConfig]  # the models to evaluate (the file's models: list; --model gives one)
    envs: list[str]
    split: str = "test"
    limit: int | None = None  # tasks per environment (the first N of the split)
    repeats: int = 1
    max_concurrency: int = 256  # episodes in flight, all models and environments together
    data_dir: Path | None = None  # official AgentBench data/ folder; None = built-in suites
    # a run of every environment: those that miss something under data_dir run without it -> what each missed
    data_dir_skipped: dict[str, str] = field(default_factory=dict)
    action_mode: str = "text"
    history: str = AGENTBENCH_HISTORY  # AgentBench v0.2's truncation; "full" is an opt-in
    judge: ModelConfig | None = None
    env_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    new_run: bool = False
    seed: int = 0  # handed to every episode's environment (card_game seeds its opponent with it)
    # only these tasks (ids as `agentbench envs --tasks ENV` lists them) of each environment that has them; like
    # limit, a selection of the same results (not in the fingerprint); None: every task
    task_ids: tuple[str, ...] | None = None
    ray: RaySettings | None = None  # where episodes run: None = this process (distributed/__init__.py)
    # an episode that ended env_error/model_error is run again within the run up to this many times (scheduler.py), the
    # earlier attempts kept, before it is scored, as AgentBench v0.2's assigner re-ran failed samples (operational: not in
    # the fingerprint); 0: never (a resume still re-runs them)
    infra_retries: int = 2
    infra_retry_backoff_s: float = 5.0  # seconds before the first of those retries, doubling for each next one (at most 300)
    # spend caps of the whole run (spend.py; operational: not in the fingerprint)
    max_cost: float | None = None  # USD at the models' prices: no new call once the run's calls cost this (earlier invocations included)
    max_total_tokens: int | None = None  # the same in input + output tokens of every call
    # per-episode limits: off by default (AgentBench has only turn caps); on, a recorded deviation
    episode_limits: EpisodeLimits | None = None  # {tokens: N, cost: USD, seconds: S}: an episode at one ends episode_limit_exceeded

    def public_dict(self) -> dict[str, Any]:
        """What is stored in ``runs.config`` (names of key variables only, never keys)."""
        public: dict[str, Any] = {
            "out": str(self.out),
            "models": [m.public_dict() for m in self.models],
            "envs": self.envs,
            "split": self.split,
            "limit": self.limit,
            "repeats": self.repeats,
            "max_concurrency": self.max_concurrency,
            "data_dir": str(self.data_dir) if self.data_dir else None,
            DATA_DIR_SKIPPED: self.data_dir_skipped,
            "action_mode": self.action_mode,
            "history": self.history,
            "judge": self.judge.public_dict() if self.judge else None,
            "env_options": _without_credentials(self.env_options),
            "seed": self.seed,
        }
        metrics = {env: env_class(env).metric for env in self.envs if env not in ENV_NAMES}
        if metrics:  # what the scores of environments that are not AgentBench's mean (analytics: declared_metrics)
            public["env_metrics"] = metrics
        checks = {env: {k: bool(v) if k == "looping" else int(v) for k, v in env_class(env).behaviour_checks.items()}
                  for env in self.envs if env_class(env).behaviour_checks}  # fmt: skip
        if checks:  # the environments' own settings of the report's behaviour heuristics (analytics: env_behaviour_checks)
            public["env_behaviour_checks"] = checks
        if self.episode_limits:  # only when set: files without them keep their stored config's shape
            public[EPISODE_LIMITS] = self.episode_limits.public_dict()
        # the result-deciding settings that are not AgentBench v0.2's (report prints them, SQL can read them)
        public[DEVIATIONS_KEY] = deviations_json(public)
        if self.ray is not None:  # where it ran (operational: not in the fingerprint)
            public["ray"] = self.ray.public_dict()
        if self.task_ids is not None:  # which tasks were picked (a selection, like limit: not in the fingerprint)
            public["task_ids"] = list(self.task_ids)
        public["infra_retries"], public["infra_retry_backoff_s"] = self.infra_retries, self.infra_retry_backoff_s
        for key in ("max_cost", "max_total_tokens"):  # the run's spend caps (operational, as limit)
            if getattr(self, key) is not None:
                public[key] = getattr(self, key)
        return SECRETS.value(public)  # no secret of the run's (a header's value, a password in an option) is stored

    def check_keys(self) -> None:
        """Every model's (and the judge's) key variable, checked before the result file is created."""
        for i, model in enumerate(self.models):
            check_key(model, f"models[{i}] ({model.name})")
        if self.judge is not None:
            check_key(self.judge, f"judge ({self.judge.name})")

    def env_data_dir(self, env: str) -> Path | None:
        """The ``--data-dir`` environment ``env`` reads: None when it runs without (skipped, or none given)."""
        return None if env in self.data_dir_skipped else self.data_dir

    def task_sources(self) -> dict[str, str]:
        """Per environment, one line on where its tasks come from (printed when the run starts)."""
        lines = {}
        for env in self.envs:
            cls = env_class(env)
            data_dir, options = self.env_data_dir(env), self.env_options.get(env) or {}
            if options.get(TASKS_FILE):
                lines[env] = f"your own tasks from {options[TASKS_FILE]} (sha256 {options.get(TASKS_SHA256)}): not the paper's"
                continue
            line = "official tasks" if cls.plays_official_tasks(data_dir, options) else "built-in suite"
            if env in self.data_dir_skipped:
                line += f", without --data-dir ({self.data_dir_skipped[env]})"
            elif data_dir is not None and not cls.plays_official_tasks(data_dir, options):
                line += " (its official tasks are a separate download: see `agentbench envs`)"
            lines[env] = line
        return lines

    def fingerprint(self) -> str:
        """A hash of what decides an episode's result. Limits, concurrency, the server address, the
        list of environments, ``limit`` and ``repeats`` are left out: changing them resumes and extends
        the same results; changing anything else is a different run."""

        def gen(m: ModelConfig) -> dict[str, Any]:
            return deciding_model_fields(m.__dict__)

        decisive = {
            "models": sorted((gen(m) for m in self.models), key=lambda d: d["name"]),
            "split": self.split,
            "data_dir": "official" if self.data_dir else "builtin",
            "action_mode": self.action_mode,
            "history": self.history,
            "judge": gen(self.judge) if self.judge else None,  # (a resume compares it only where ltp ran: differences.py)
            # a file environment's path is where it was, not what it does (its code is there, as ``code``)
            "env_options": {env: {k: v for k, v in opts.items() if k != ENV_FILE} for env, opts in self.env_options.items()},
            "seed": self.seed,
        }
        if self.data_dir_skipped:  # only then: the fingerprints of runs without (all earlier ones) stay as they were
            decisive[DATA_DIR_SKIPPED] = sorted(self.data_dir_skipped)
        if self.episode_limits:  # they end episodes: a run with them is another configuration (only then: others unchanged)
            decisive[EPISODE_LIMITS] = self.episode_limits.public_dict()
        return hashlib.sha256(json.dumps(decisive, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _without_credentials(env_options: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Environment options as stored: a URL's user and password (``db_url: mysql://root:secret@host/db``) as ``***``."""
    return {env: {k: redact_url(v) if isinstance(v, str) and "://" in v else v for k, v in opts.items()}
            for env, opts in env_options.items()}  # fmt: skip


_TOP_KEYS = {
    "out", "models", "envs", "split", "limit", "repeats", "max_concurrency", "data_dir", "action_mode",
    "history", "judge", "env_options", "seed", "ray", "tasks", "task_ids", "infra_retries", "infra_retry_backoff_s", "max_cost", "max_total_tokens", EPISODE_LIMITS,
}  # fmt: skip


def model_from_dict(raw: Any, where: str) -> ModelConfig:
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with at least 'name'")
    unknown = sorted(set(raw) - set(_MODEL_FIELDS))
    if unknown:
        raise ConfigError(f"{where}: unknown field {shown(unknown[0])} (known: {', '.join(sorted(_MODEL_FIELDS))})")
    if not raw.get("name"):
        raise ConfigError(f"{where}: 'name' is required")
    if "api_key" in raw:
        raise ConfigError(f"{where}: put the key in an environment variable and name it in api_key_env")
    cfg = ModelConfig(**raw)
    cfg.left_to_engine = frozenset(ADAPTABLE) - set(raw)
    apply_family_defaults(cfg, raw)  # OpenAI's reasoning models by name: max_completion_tokens, no temperature
    _check_model(cfg, where)
    apply_sdk_environment(cfg, raw, where)  # OPENAI_API_KEY, ANTHROPIC_BASE_URL, ... where the config names none
    return cfg


def _check_model(cfg: ModelConfig, where: str) -> None:
    """Every field of a model: its type, range or choices, one line naming the field and what is valid."""
    if cfg.provider not in PROVIDERS:
        raise ConfigError(f"{where}.provider: {shown(cfg.provider)} is not one of {', '.join(PROVIDERS)}")
    for name in ("name", "model", "api_key_env", "anthropic_version"):
        value = getattr(cfg, name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where}.{name}: expected a non-empty string, got {shown(value)}")
    for name, minimum in (("max_tokens", 1), ("max_in_flight", 1), ("max_connections", 1), ("max_retries", 0), ("max_same_failures", 0)):
        if name == "max_in_flight" and cfg.max_in_flight == "auto":
            continue
        if not _is_int(getattr(cfg, name), minimum):
            kind = ("a positive integer or auto" if name == "max_in_flight" else "a positive integer") if minimum else "an integer >= 0"
            raise ConfigError(f"{where}.{name}: expected {kind}, got {shown(getattr(cfg, name))}")
    for name in ("rpm", "tpm", "context_window"):
        value = getattr(cfg, name)
        if name != "context_window" and value == "auto":
            continue  # the server's reported limit (the same as leaving it out)
        if value is not None and not _is_int(value, 1):
            also = " or auto (the limit the server reports)" if name != "context_window" else ""
            raise ConfigError(f"{where}.{name}: expected a positive integer{also} or nothing, got {shown(value)}")
    for name, above, what in (("timeout", True, "seconds > 0"), ("rate_window_s", True, "seconds > 0"),
                              ("retry_backoff_s", False, "seconds >= 0"), ("retry_backoff_max_s", False, "seconds >= 0"),
                              ("retry_after_max_s", False, "seconds >= 0 (the longest pause a Retry-After gets)")):  # fmt: skip
        if not _is_number(getattr(cfg, name), 0, above=above):
            raise ConfigError(f"{where}.{name}: expected {what}, got {shown(getattr(cfg, name))}")
    _check_temperature(cfg, where)
    for name in ("task_header", "prompt_caching"):
        if not isinstance(getattr(cfg, name), bool):
            raise ConfigError(f"{where}.{name}: expected true or false, got {shown(getattr(cfg, name))}")
    _check_request_fields(cfg, where)
    if cfg.base_url is not None:
        check_http_url(cfg.base_url, f"{where}.base_url")
    if not isinstance(cfg.max_response_bytes, int) or isinstance(cfg.max_response_bytes, bool) or cfg.max_response_bytes < 1024:
        raise ConfigError(f"{where}.max_response_bytes: expected the largest response body to read, in bytes (>= 1024; default "
                          f"{DEFAULT_MAX_RESPONSE_BYTES:,}), got {shown(cfg.max_response_bytes)}")  # fmt: skip
    cfg.check(where)  # reasoning fields, Anthropic thinking constraints, proxy/CA fields
    if batch_settings(cfg.batch, where) is not None and cfg.provider == "azure":
        raise ConfigError(f"{where}.batch: Azure OpenAI's batch API is not supported; remove batch (direct calls)")
    if cfg.api_version is not None and (not isinstance(cfg.api_version, str) or not cfg.api_version.strip()):
        raise ConfigError(f"{where}.api_version: expected Azure's api-version as text (e.g. 2024-10-21), got {shown(cfg.api_version)}")
    for name in ("price_in", "price_out", "price_cached_in", "price_cache_write"):
        value = getattr(cfg, name)
        if value is not None and not _is_number(value, 0):
            raise ConfigError(f"{where}.{name}: expected USD per 1M tokens (a number >= 0), got {shown(value)}")
    cap_value(cfg.max_cost, f"{where}.max_cost", whole=False)
    cap_value(cfg.max_total_tokens, f"{where}.max_total_tokens", whole=True)
    if not _is_number(cfg.batch_discount, 0) or cfg.batch_discount > 1:
        raise ConfigError(f"{where}.batch_discount: expected the share a batch request saves, 0 to 1 (0.5 = half price), got {shown(cfg.batch_discount)}")


# The temperature each provider accepts (OpenAI's API reference: 0 to 2; Anthropic's Messages API: 0 to 1).
TEMPERATURE_RANGES = {"openai": 2.0, "anthropic": 1.0}
# What a request body is made of: extra_body adds to it, never replaces it.
_REQUEST_CORE = ("messages", "model", "tools")


def _check_temperature(cfg: ModelConfig, where: str) -> None:
    top = TEMPERATURE_RANGES.get(cfg.provider, 2.0)
    if cfg.temperature is not None and (not _is_number(cfg.temperature, 0) or cfg.temperature > top):
        raise ConfigError(f"{where}.temperature: expected a number from 0 to {top:g} ({cfg.provider}) or null (the server's "
                          f"default), got {shown(cfg.temperature)}")  # fmt: skip


def _check_request_fields(cfg: ModelConfig, where: str) -> None:
    if not isinstance(cfg.extra_body, dict):
        raise ConfigError(f"{where}.extra_body: expected a mapping of request fields (e.g. {{top_p: 0.9}}), got {shown(cfg.extra_body)}")
    replaced = [k for k in _REQUEST_CORE if k in cfg.extra_body]
    if replaced:
        raise ConfigError(f"{where}.extra_body.{replaced[0]}: extra_body adds fields to the request and may not replace "
                          f"{', '.join(_REQUEST_CORE)} (set 'model' as the model's own field)")  # fmt: skip
    if not isinstance(cfg.headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in cfg.headers.items()):
        raise ConfigError(f"{where}.headers: expected a mapping of header names to text values, got {shown(cfg.headers)}")


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_number(value: Any, minimum: float, *, above: bool = False) -> bool:
    """A finite int or float (not a bool) at least ``minimum`` (above it, when ``above``)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return False
    return value > minimum if above else value >= minimum


def env_named(name: str, where: str) -> str:
    """An environment's name as registered, whatever its case (``OS``, ``Card_Game``); an unknown one is refused with the
    closest known name. A Python file (``./guess_number.py``) is loaded and checked (``envs/files.py``): its name."""
    if is_env_file(name):
        return load_env_file(name).cls.name
    if not name.strip():
        raise ConfigError(f"{where}: an empty environment name; name one (agentbench envs lists them), or all")
    try:
        env_class(name)
        return name
    except AgentBenchError as exc:
        unknown = exc
    lowered = name.strip().lower()
    if lowered != name:
        with contextlib.suppress(AgentBenchError):
            env_class(lowered)
            return lowered
    # a known name that failed (a plugin that cannot be loaded) gets no suggestion of itself
    close = difflib.get_close_matches(lowered, [e for e in [*available_envs(), *plugin_envs()] if e != lowered], n=1, cutoff=0.6)
    raise ConfigError(f"{where}: {unknown}" + (f"; did you mean {close[0]}?" if close else "")) from None


def _settle_code(env: str, env_options: dict[str, dict[str, Any]]) -> None:
    """A file environment's path and every environment's code (``envs/code.py``) among its options: in the fingerprint,
    so a run with edited code is not resumed as the same results."""
    file_env = loaded_env_file(env)
    code = code_of(env)
    if file_env is not None:
        env_options.setdefault(env, {})[ENV_FILE] = str(file_env.path)
    if code is not None:
        env_options.setdefault(env, {})[CODE] = code


def envs_missing_data(envs: list[str], data_dir: Path, env_options: Mapping[str, Any], split: str, action_mode: str) -> dict[str, str]:
    """In a run of every environment, those that miss something under ``data_dir`` (``Environment.missing_data``) -> what."""
    skipped = {}
    for env in envs:
        missing = env_class(env).missing_data(data_dir, env_options.get(env) or {}, split, action_mode)
        if missing:
            skipped[env] = missing
    return skipped


def load_config_file(path: Path) -> dict[str, Any]:
    text = read_config_text(path)  # size-capped, UTF-8 (bounds.py)
    try:
        raw = load_yaml(text, path)  # bounded by what it expands to (bounds.py)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}:{where} is not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown setting {shown(unknown[0])} (known: {', '.join(sorted(_TOP_KEYS))})")
    return raw


def build_config(raw: dict[str, Any], *, where: str = "config") -> RunConfig:
    """Validate a merged settings mapping (file values overridden by flags) into a ``RunConfig``."""
    if not raw.get("out"):
        raise ConfigError(f"{where}: no output file; give --out PATH.duckdb (or 'out:' in the config)")
    out = Path(raw["out"])
    if out.suffix != ".duckdb":
        raise ConfigError(f"{where}: --out {out} should end in .duckdb")
    models_raw = raw.get("models") or []
    if not isinstance(models_raw, list) or not models_raw:
        raise ConfigError(f"{where}: no model; give --model NAME (or a 'models:' list in the config)")
    models = [model_from_dict(m, f"{where}: models[{i}]") for i, m in enumerate(models_raw)]
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: model names must be unique (got {names}); give each a distinct 'name'")
    envs_raw = raw.get("envs") or []
    if isinstance(raw.get("envs"), str) and not raw["envs"].strip(", "):  # --env "": not every environment by accident
        raise ConfigError(f"{where}: --env is empty; name environments (agentbench envs lists them), a FILE.py, or all")
    if isinstance(envs_raw, str):
        envs_raw = [e.strip() for e in envs_raw.split(",") if e.strip()]
    action_mode = raw.get("action_mode", "text")
    if not isinstance(envs_raw, (list, tuple)) or not all(isinstance(e, str) for e in envs_raw):
        raise ConfigError(f"{where}: envs: expected environment names (a list or comma-separated), got {shown(envs_raw)}")
    every_env = not envs_raw or ALL_ENVS in (e.lower() for e in envs_raw)
    envs_raw = [env_named(e, f"{where}: envs") for e in envs_raw if e.lower() != ALL_ENVS]  # OS, Card_Game: as registered
    if every_env:  # every environment (in tools mode, every one with a tools mode: AgentBench FC defines no others)
        named = envs_raw  # plugin environments run only when named: --env all,NAME
        envs_raw = [e for e in available_envs() if action_mode != "tools" or env_class(e).supports_tools]
        envs_raw += [e for e in named if e not in envs_raw]
    split = raw.get("split", "test")
    split = SPLIT_ALIASES.get(split, split) if isinstance(split, str) else split
    if split not in ("dev", "test"):
        raise ConfigError(f"{where}: split {shown(split)} is not dev or test (std, AgentBench's name for test, is taken too)")
    if action_mode not in ("text", "tools"):
        raise ConfigError(f"{where}: action_mode {shown(action_mode)} is not text or tools")
    if action_mode == "tools":
        for env in envs_raw:
            if not env_class(env).supports_tools:
                raise ConfigError(f"{where}: environment {shown(env)} has no tools mode (AgentBench FC defines none); use --action-mode text")
    history = raw.get("history", AGENTBENCH_HISTORY)
    if history not in POLICY_NAMES:
        raise ConfigError(f"{where}: history {shown(history)} is not one of {', '.join(POLICY_NAMES)}")
    ints = {}
    for key, minimum in (("limit", 1), ("repeats", 1), ("max_concurrency", 1), ("seed", 0), ("infra_retries", 0)):
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ConfigError(f"{where}: {key} must be an integer >= {minimum}, got {shown(value)}")
        ints[key] = value
    data_dir = Path(raw["data_dir"]).expanduser() if raw.get("data_dir") else None
    if data_dir is not None and not data_dir.is_dir():
        raise ConfigError(f"{where}: --data-dir {data_dir} is not a directory (point it at AgentBench's data/ folder)")
    env_options = raw.get("env_options") or {}
    if not isinstance(env_options, dict) or not all(isinstance(v, dict) for v in env_options.values()):
        raise ConfigError(f"{where}: env_options must map environment names to mappings of options")
    env_options = {env_named(env, f"{where}: env_options"): dict(options) for env, options in env_options.items()}
    merge_tasks_setting(raw.get("tasks"), env_options, where)  # tasks: {ENV: PATH}, the user's own task files
    for env, options in env_options.items():  # every option against its environment's declarations, now
        for value in options.values():  # a URL's user and password (db_url): never stored or printed (redaction.py)
            register_url(value)
        try:
            cls = env_class(env)
        except AgentBenchError as exc:
            raise ConfigError(f"{where}: env_options: {exc}") from None
        cls.check_options(options)
    settle_task_files(env_options, split, where)  # read in full now (one line for a bad record); path and sha256 stored
    skipped = envs_missing_data(envs_raw, data_dir, env_options, split, action_mode) if every_env and data_dir is not None else {}
    for env in envs_raw:  # what this machine chooses for an option not given is stored too (Environment.settled_options)
        settled = env_class(env).settled_options(None if env in skipped else data_dir, env_options.get(env) or {})
        if settled:
            env_options[env] = settled
        _settle_code(env, env_options)
    # options of environments this run does not play decide nothing here (a config file kept for several runs): left out
    env_options = {env: options for env, options in env_options.items() if env in envs_raw}
    judge = model_from_dict(raw["judge"], f"{where}: judge") if raw.get("judge") else None
    judged = [e for e in envs_raw if env_class(e).needs_judge]
    if judged and judge is None:
        raise ConfigError(f"{where}: {judged[0]} needs a judge model to host its games: give --judge-model NAME (with --judge-base-url, "
                          f"--judge-api-key-env when not the model's server), or leave {judged[0]} out of --env")  # fmt: skip
    return RunConfig(
        out=out,
        models=models,
        envs=list(envs_raw),
        split=split,
        limit=ints.get("limit"),
        repeats=ints.get("repeats", 1),
        max_concurrency=ints.get("max_concurrency", 256),
        data_dir=data_dir,
        data_dir_skipped=skipped,
        action_mode=action_mode,
        history=history,
        judge=judge,
        env_options={k: dict(v) for k, v in env_options.items()},
        new_run=bool(raw.get("new_run", False)),
        seed=ints.get("seed", 0),
        ray=ray_settings(raw.get("ray"), where=where),
        task_ids=_task_ids(raw.get("task_ids"), where),
        infra_retries=ints.get("infra_retries", 2),
        infra_retry_backoff_s=_backoff(raw.get("infra_retry_backoff_s", 5.0), where),
        **_spend_settings(raw, models, judge, where),
    )


def _spend_settings(raw: dict[str, Any], models: list[ModelConfig], judge: ModelConfig | None, where: str) -> dict[str, Any]:
    """The run's caps and per-episode limits (spend.py); a cost cap or limit needs every model's prices."""
    settings = {
        "max_cost": cap_value(raw.get("max_cost"), f"{where}: max_cost", whole=False),
        "max_total_tokens": cap_value(raw.get("max_total_tokens"), f"{where}: max_total_tokens", whole=True),
        "episode_limits": episode_limits(raw.get(EPISODE_LIMITS), where),
    }
    limits = settings["episode_limits"]
    costed = [("max_cost", m) for m in models if settings["max_cost"] is not None or m.max_cost is not None]
    costed += [(f"{EPISODE_LIMITS}.cost", m) for m in models if limits is not None and limits.cost is not None]
    if judge is not None and settings["max_cost"] is not None:
        costed.append(("max_cost", judge))
    for what, model in costed:
        if model.price_in is None or model.price_out is None:
            raise ConfigError(f"{where}: {what} needs the prices of model {shown(model.name)}: set price_in and price_out (USD per 1M "
                              f"tokens) in its config, or --price {model.name}=IN,OUT")  # fmt: skip
    return settings


def _backoff(raw: Any, where: str) -> float:
    """``infra_retry_backoff_s``: seconds >= 0 before the first retry of an infrastructure failure."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 <= raw <= 3600:
        raise ConfigError(f"{where}: infra_retry_backoff_s must be a number of seconds from 0 to 3600, got {shown(raw)}")
    return float(raw)


def _task_ids(raw: Any, where: str) -> tuple[str, ...] | None:
    """``task_ids``: a list of task ids (``--task-id``, ``--task-ids FILE``), duplicates dropped, order kept."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, (list, tuple)) or not raw or not all(isinstance(t, (str, int)) and str(t).strip() for t in raw):
        raise ConfigError(f"{where}: task_ids: expected a list of task ids (agentbench envs --tasks ENV lists them), got {shown(raw)}")
    return tuple(dict.fromkeys(str(t).strip() for t in raw))
