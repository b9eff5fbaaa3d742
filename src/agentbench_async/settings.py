"""The run settings that decide results, and how a run's differ from AgentBench v0.2's.

Every default of ``agentbench run`` is AgentBench v0.2's behaviour (its history truncation, turn caps,
prompts and metrics, the official tasks of the test split, text actions); anything else is an opt-in. A run
records the opt-ins it used in ``runs.config`` (``agentbench_deviations``), ``report`` prints them above the
scores and ``compare`` refuses to pair runs whose result-deciding settings differ. Both work from the stored
config, so files written before the list was stored get the same answer.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .deviation import Deviation
from .envs import ENV_NAMES, env_class
from .envs.own_tasks import own_task_deviations, own_task_file
from .errors import AgentBenchError

AGENTBENCH_HISTORY = "agentbench"  # v0.2 truncates every task's history to 3,500 segments
AGENTBENCH_LTP_JUDGE = "gpt-3.5-turbo-0613"  # v0.2's LTP host, temperature 0
DEVIATIONS_KEY = "agentbench_deviations"  # where the list is stored in runs.config
DATA_DIR_SKIPPED = "data_dir_skipped"  # runs.config: environments that ran without --data-dir -> what they missed there
EPISODE_LIMITS = "episode_limits"  # runs.config: per-episode limits of tokens, cost, wall time (spend.py), when set


def env_result_options(env: str) -> dict[str, Any]:
    """``env``'s options that decide results, with AgentBench v0.2's value (None: no such option upstream)."""
    try:
        return dict(env_class(env).result_options)
    except AgentBenchError:
        return {}  # an environment this installation lacks: its options cannot be judged here


def env_deviations(env: str, config: dict[str, Any]) -> list[Deviation]:
    """``env``'s own differences from AgentBench v0.2 in a run with this stored config (its prompts' wording, ...)."""
    options = (config.get("env_options") or {}).get(env) or {}
    try:
        cls = env_class(env)
    except AgentBenchError:
        return []
    return cls.deviations(env_data_dir(env, config), options, str(config.get("action_mode") or "text"))


def env_data_dir(env: str, config: dict[str, Any]) -> Any:
    """The ``--data-dir`` ``env`` read in a stored run (``runs.config``): None when it ran without it (a run of every
    environment plays those that miss something there without it, ``data_dir_skipped``)."""
    return None if env in (config.get(DATA_DIR_SKIPPED) or {}) else config.get("data_dir")


def official_tasks(env: str, config: dict[str, Any]) -> bool:
    """Whether the run played ``env``'s official tasks (``--data-dir``, or the environment's own download)."""
    options = (config.get("env_options") or {}).get(env) or {}
    try:
        return env_class(env).plays_official_tasks(env_data_dir(env, config), options)
    except AgentBenchError:
        return bool(env_data_dir(env, config))


def deviations(config: dict[str, Any]) -> list[Deviation]:
    """The run's result-deciding settings that differ from AgentBench v0.2, from its stored config
    (``RunConfig.public_dict()``). A setting missing from the config (files of older versions) is not judged."""
    out: list[Deviation] = []
    # only AgentBench's environments have a paper to differ from (a plugin's, a --env FILE.py's scores are their own)
    paper_envs = [env for env in config.get("envs") or [] if env in ENV_NAMES]
    if "envs" in config and not paper_envs:
        return own_task_deviations(config)
    if "history" in config and config["history"] != AGENTBENCH_HISTORY:
        out.append(Deviation("history", str(config["history"]), "3,500-segment truncation (--history agentbench)"))
    if config.get("action_mode") == "tools":
        out.append(Deviation("action_mode", "tools", "text actions (tools mode is AgentBench FC's function calling)"))
        if config.get("history", AGENTBENCH_HISTORY) == AGENTBENCH_HISTORY:  # (--history full is named above)
            out.append(Deviation("tools_history", "the whole opening kept, then v0.2's 3,500-segment rule",
                                 "FC's own history rule (in THUDM/AgentRL, not available)", "AgentBench FC's history is not reproduced"))
    envs = paper_envs
    own = [env for env in envs if not official_tasks(env, config) and own_task_file(env, config) is None]
    if "data_dir" in config and own:
        value = "built-in task suites" + ("" if len(own) == len(envs) else f" ({', '.join(own)})")
        out.append(Deviation("data", value, "the official tasks (--data-dir)", "not the paper's tasks", envs=() if len(own) == len(envs) else tuple(own)))
    out += own_task_deviations(config)  # --tasks ENV=PATH: the user's own task files
    if config.get("split") == "dev":
        out.append(Deviation("split", "dev", "the paper reports the test (std) split", "not the paper's tasks"))
    env_options = config.get("env_options") or {}
    for env in envs:
        options = env_options.get(env) or {}
        for key, upstream in env_result_options(env).items():
            if key in options and (upstream is None or str(options[key]) != str(upstream)):
                out.append(Deviation(f"{env}.{key}", str(options[key]), "no such option" if upstream is None else str(upstream), envs=(env,)))
        out += env_deviations(env, config)
    limits = config.get(EPISODE_LIMITS)
    if isinstance(limits, dict) and limits:
        value = ", ".join(f"{k} {v}" for k, v in sorted(limits.items()))
        out.append(Deviation(EPISODE_LIMITS, value, "turn caps only", "episodes that reach a limit end episode_limit_exceeded"))
    judge = config.get("judge")
    if "ltp" in envs and isinstance(judge, dict):
        judge_id = judge.get("model") or judge.get("name")
        temperature = judge.get("temperature", 0)
        if judge_id != AGENTBENCH_LTP_JUDGE or temperature not in (0, 0.0):
            out.append(Deviation("judge", f"{judge_id} (temperature {temperature})", f"{AGENTBENCH_LTP_JUDGE} (temperature 0)",
                                 "ltp scores depend on the judge", envs=("ltp",)))
    for i, model in enumerate(config.get("models") or []):
        if isinstance(model, dict) and model.get("context_window"):
            out.append(Deviation(f"models[{i}].context_window", f"{model['context_window']} ({model.get('name')})",
                                 "overflow only when the server refuses the prompt",
                                 "estimated prompts end episodes early"))
    return out


def recorded_deviations(config: dict[str, Any]) -> list[Deviation]:
    """The list a run stored with its config, or (older files) the one computed from that config."""
    stored = config.get(DEVIATIONS_KEY)
    if isinstance(stored, list):
        return [Deviation(**{**d, "envs": tuple(d.get("envs") or ())}) for d in stored if isinstance(d, dict)]
    return deviations(config)


def deviations_json(config: dict[str, Any]) -> list[dict[str, Any]]:
    """What a run stores under ``runs.config.agentbench_deviations``."""
    return [asdict(d) for d in deviations(config)]
