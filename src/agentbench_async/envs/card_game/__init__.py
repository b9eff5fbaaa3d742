"""``card_game``: AgentBench v0.2's Digital Card Game (DCG, "Aquawar") against rule-based opponents.

The model plays one game of Aquawar per sample (four fish a side, a guess and an action every turn)
against ``baseline1`` or ``baseline2``, from seat 0 (moves first) or seat 1. The game engine, the
opponents and the metric are this package's own deterministic Python (``engine.py``, ``baselines.py``);
see docs/envs/card_game.md. Score = 0.7 x win + 0.3 x damage dealt / 1600.

Two modes. The default, ``agentbench``, is AgentBench v0.2's game as its LLM client played it
(``agentbench_session.py``): two conversations with the rules re-inserted before every call, upstream's
display and digit mapping, eel's and sunfish's skills refused, 300 s of model time per decision and 600 s per
game; with ``--data-dir`` every text is upstream's, read from the pulled source files (``wording.py``). The
fixed game (``fixes=true``, ``session.FixedSession``) repairs upstream's bugs; it is recorded as a deviation.

Options (``Environment(options=...)``, from ``--env-option card_game.KEY=VALUE`` or the config):

- ``fixes``: ``true`` plays the fixed game (default ``false``: AgentBench's).
- ``decision_seconds`` / ``game_seconds``: the time limits of the ``agentbench`` mode in seconds of model time
  (default 300 / 600 as upstream; 0 turns a limit off). The fixed game has none (giving them is refused).
- ``test_time``: games per (opponent, seat) pair, generating ``4 x test_time`` samples per split instead of
  upstream's 3 (dev, 12 samples) and 5 (test = std, 20 samples), for more variety.

Text mode only: AgentBench FC defines no tools for the card game, so ``--action-mode tools`` is refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...environment import (
    ConfigError,
    Deviation,
    Environment,
    EpisodeContext,
    Option,
    Session,
    Task,
    bool_option,
    int_option,
    missing_file,
)
from ..upstream_prompts import V02, upstream_path
from .agentbench_session import AgentBenchSession, TimeLimits
from .engine import STATE_LIMIT
from .protocol import MAX_TRIES
from .session import FixedSession
from .tasks import load_tasks
from .wording import AGENT_FILE, CLIENT_FILE, PROMPT_FILE, Wording, load_wording

# The model decides at most 32 times per game as player 0 (31 as player 1), a guess and an action each,
# with up to 5 tries per decision: upstream's own ceiling on replies per game.
MAX_MODEL_TURNS = STATE_LIMIT // 4
MAX_REPLIES = MAX_MODEL_TURNS * 2 * MAX_TRIES


class CardGameEnvironment(Environment):
    name: ClassVar[str] = "card_game"
    description: ClassVar[str] = "Digital Card Game (Aquawar): a turn-based fish battle with guessing against rule-based opponents"
    max_turns: ClassVar[int] = MAX_REPLIES
    metric: ClassVar[str] = "reward (0.7 win + 0.3 damage)"
    supports_tools: ClassVar[bool] = False  # AgentBench FC defines no tools for the card game
    requires: ClassVar[str] = "nothing (the game engine is built in)"
    # upstream fixes test_time per split (3 dev, 5 std); another value plays other games than the paper's.
    # fixes and the wording are judged by deviations() below.
    result_options: ClassVar[dict[str, Any]] = {"test_time": None, "decision_seconds": 300, "game_seconds": 600}
    builtin_is_official: ClassVar[bool] = True  # the built-in samples are upstream's generation itself
    option_specs: ClassVar[dict[str, Option]] = {
        "test_time": Option("int", "games per opponent and seat"),
        "fixes": Option("bool"),
        "decision_seconds": Option("int", "model time per decision, 0 for none", minimum=0),
        "game_seconds": Option("int", "model time per game, 0 for none", minimum=0),
        # stored by the run (settled_options), not meant to be given: whose acknowledgement follows the rules
        "acknowledgement": Option("choice", "upstream's from AI/client.py, or the project's own", choices=("upstream", "own")),
    }

    @classmethod
    def settled_options(cls, data_dir: Path | None, options: Mapping[str, Any]) -> dict[str, Any]:
        """AgentBench's game read from ``--data-dir``: whether upstream's acknowledgement is there (``AI/client.py``:
        ``agentbench data pull`` fetches it, AgentBench's ``data/`` lacks it), stored so the run's deviations say when it is not."""
        settled = dict(options)
        fixed = str(settled.get("fixes", "false")).strip().lower() != "false"
        if data_dir is not None and not fixed and "acknowledgement" not in settled:
            settled["acknowledgement"] = "upstream" if upstream_path(Path(data_dir), V02, CLIENT_FILE).is_file() else "own"
        return settled

    @classmethod
    def deviations(cls, data_dir: object, options: dict[str, Any], action_mode: str) -> list[Deviation]:
        out = [Deviation("card_game.opponents", "the project's Python engine and baselines, seeded per game (i, 1000 + i)",
                         "AgentBench's C++ engine and baselines, seeded by the clock", "the opponent's draws differ",
                         envs=("card_game",))]  # fmt: skip
        fixed = str(options.get("fixes", "false")).strip().lower() != "false"  # judged from stored settings: never raises
        if fixed:
            out.append(Deviation("card_game.fixes", "true: one conversation, eel and sunfish skills sent, display corrected, "
                                 "no time limits", "two conversations with the rules re-inserted, eel and sunfish skills "
                                 "refused, upstream's display, 300 s per decision and 600 s per game", "the game differs",
                                 envs=("card_game",)))  # fmt: skip
        if fixed or not data_dir:
            out.append(Deviation("card_game.prompts", "the project's own wording", "upstream's texts, read from --data-dir",
                                 "prompt wording differs", envs=("card_game",)))  # fmt: skip
        elif options.get("acknowledgement") == "own":
            out.append(Deviation("card_game.acknowledgement", f"the project's own ({CLIENT_FILE} was not in --data-dir)",
                                 "upstream's acknowledgement after the rules (AI/client.py)", "prompt wording differs",
                                 envs=("card_game",)))  # fmt: skip
        return out

    @classmethod
    def missing_data(cls, data_dir: Path, options: Mapping[str, Any], split: str, action_mode: str) -> str | None:
        return missing_file([upstream_path(data_dir, V02, PROMPT_FILE), upstream_path(data_dir, V02, AGENT_FILE)])  # the wording

    def __init__(self, *, data_dir: Path | None = None, options: dict[str, Any] | None = None) -> None:
        super().__init__(data_dir=data_dir, options=options)
        self.test_time = _test_time(self.options.get("test_time"))
        self.fixes = _fixes(self.options.get("fixes", False))
        for key in ("decision_seconds", "game_seconds"):
            if self.fixes and key in self.options:
                raise ConfigError(f"card_game: option {key} applies to AgentBench's game; the fixed game (fixes=true) has no time limits")
        default = TimeLimits()
        self.limits = TimeLimits(
            decision=_seconds(self.options.get("decision_seconds", default.decision), "decision_seconds", "model time per decision"),
            game=_seconds(self.options.get("game_seconds", default.game), "game_seconds", "model time per game"),
        )
        self._wording: Wording | None = None

    @property
    def capacity(self) -> int:
        # A game is a few kilobytes of pure-Python state and a step takes microseconds.
        return 10_000

    def tasks(self, split: str) -> Iterator[Task]:
        return load_tasks(self.name, split, self.data_dir, self.test_time)

    @property
    def wording(self) -> Wording:
        """The ``agentbench`` mode's texts: upstream's from ``--data-dir``, else the project's."""
        if self._wording is None:
            self._wording = load_wording(self.data_dir)
        return self._wording

    async def start(self) -> None:
        if not self.fixes:
            self.wording  # noqa: B018 - read upstream's files now: a missing one fails the run, not each episode

    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        if ctx.action_mode == "tools":
            raise ConfigError("card_game has no tools mode (AgentBench FC defines no card-game tools); use --action-mode text")
        if self.fixes:
            return FixedSession(task, ctx)
        return AgentBenchSession(task, ctx, self.wording, self.limits)


def _fixes(value: object) -> bool:
    return bool_option("card_game", "fixes", value)


def _test_time(value: object) -> int | None:
    if value is None:
        return None
    return int_option("card_game", "test_time", value, meaning="games per opponent and seat")


def _seconds(value: object, key: str, meaning: str) -> float:
    return float(int_option("card_game", key, value, minimum=0, meaning=f"{meaning}, 0 for none"))


__all__ = ["MAX_REPLIES", "CardGameEnvironment"]
