"""``ltp``: Lateral Thinking Puzzles (AgentBench v0.2), with a model as the host.

The model under test is the player: it asks yes/no questions about a puzzling story; a judge model
(``--judge-model``) hosts the game, answering from the hidden truth, and decides which of the truth's
answer keys the player has uncovered. Score = game progress (share of answer keys hit).

Options (``Environment(options=...)``, from ``--env-option``/config):
    ``language``: ``en`` (default) or ``zh`` (the Chinese official set, ``lateralthinkingpuzzle_zh``);
    ``prompter``: the wording the player and the host get, ``en`` (default: v0.2's start_sample uses ENPrompter for
        every puzzle set, the Chinese one too) or ``zh`` (ZHPrompter's Chinese wording: the deviation ``ltp.prompter``);
    ``rounds``: questions per game (default 25, as the paper);
    ``overlap``: the host's calls after its answer run beside the player's next turn (default true; see session.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...environment import ConfigError, Deviation, Environment, EpisodeContext, Option, Session, Task, TaskFileError, missing_file
from ...resources import environments_dir
from ..upstream_prompts import V02, upstream_path
from .data import load_builtin, load_official, official_path
from .prompts import PROMPTERS, UPSTREAM_TASK, Prompter, load_prompter
from .session import LTPSession, require_judge

DEFAULT_ROUNDS = 25
_BUILTIN_FILES = {"dev": "dev.jsonl", "test": "test.jsonl"}


class LTPEnvironment(Environment):
    name: ClassVar[str] = "ltp"
    description: ClassVar[str] = "Lateral Thinking Puzzles: ask yes/no questions to uncover a hidden story (judge model hosts)"
    max_turns: ClassVar[int] = DEFAULT_ROUNDS
    metric: ClassVar[str] = "game progress"
    supports_tools: ClassVar[bool] = False  # AgentBench FC defines no tools for LTP
    requires: ClassVar[str] = "a judge model (--judge-model); openpyxl for the official .xlsx files"
    needs_judge: ClassVar[bool] = True
    task_file_format: ClassVar[str] = ("an AgentBench LTP workbook (.xlsx, columns story | answer | story keys | answer keys, as "
                                       "data/lateralthinkingpuzzle/dev.xlsx) or JSONL as the built-in suite's (.jsonl)")
    result_options: ClassVar[dict[str, Any]] = {"rounds": DEFAULT_ROUNDS, "language": "en", "prompter": "en"}
    option_specs: ClassVar[dict[str, Option]] = {
        "language": Option("choice", "the official English or Chinese puzzles", choices=tuple(PROMPTERS)),
        "prompter": Option("choice", "the wording of the player's and the host's prompts; AgentBench v0.2 uses English (ENPrompter) "
                           "for the Chinese puzzles too", choices=tuple(PROMPTERS)),
        "rounds": Option("int", "questions per game; AgentBench uses 25"),
        "overlap": Option("bool", "the host's restating, merging and key comparisons beside the player's next turn (same calls "
                          "and results, about half the time); false: one call after another"),
    }

    @classmethod
    def settled_options(cls, data_dir: Path | None, options: Mapping[str, Any]) -> dict[str, Any]:
        """The Chinese puzzles' wording, stored when not given: until issue 38 they were played in ZHPrompter's words, now
        in v0.2's English ones, so a run of them records ``prompter`` and is never resumed into an earlier one's results
        (whose stored options lack it: another fingerprint)."""
        settled = dict(options)
        if str(settled.get("language") or "en") == "zh" and "prompter" not in settled:
            settled["prompter"] = "en"
        return settled

    @classmethod
    def missing_data(cls, data_dir: Path, options: Mapping[str, Any], split: str, action_mode: str) -> str | None:
        return missing_file([official_path(data_dir, str(options.get("language") or "en"), split), upstream_path(data_dir, V02, UPSTREAM_TASK)])

    @classmethod
    def deviations(cls, data_dir: object, options: dict[str, Any], action_mode: str) -> list[Deviation]:
        if data_dir:
            return []
        return [Deviation("ltp.prompts", "the project's own player prompt and host (judge) prompts",
                          "upstream's (ENPrompter/ZHPrompter), read from --data-dir", "prompt wording differs", envs=("ltp",))]  # fmt: skip

    def prompter(self, language: str) -> Prompter:
        """The wording in ``language`` (the ``prompter`` option, not the puzzles' language): upstream's ENPrompter or
        ZHPrompter with ``--data-dir`` (read once), else the project's own."""
        if self.data_dir is None:
            return PROMPTERS.get(language, PROMPTERS["en"])
        if language not in self._prompters:
            self._prompters[language] = load_prompter(self.data_dir, language)
        return self._prompters[language]

    def __init__(self, *, data_dir: Path | None = None, options: dict[str, Any] | None = None) -> None:
        super().__init__(data_dir=data_dir, options=options)
        self.language: str = self.option("language", "en")
        self.wording: str = self.option("prompter", "en")  # v0.2: ENPrompter whatever the puzzles' language
        self.rounds: int = self.option("rounds", DEFAULT_ROUNDS)
        # The engine's turn cap follows the configured number of rounds.
        self.max_turns = self.rounds  # type: ignore[misc]
        self._cache: dict[str, list[dict[str, Any]]] = {}
        self._prompters: dict[str, Prompter] = {}

    @property
    def capacity(self) -> int:
        # An episode is a few kilobytes of state; the judge's own rate limits bound the real concurrency.
        return 1000

    def _records(self, split: str) -> tuple[list[dict[str, Any]], str]:
        if split not in _BUILTIN_FILES:
            raise TaskFileError(f"ltp: unknown split {split!r} (use dev or test)")
        source = "official" if self.data_dir is not None else "builtin"
        if split not in self._cache:
            if self.data_dir is not None:
                self._cache[split] = load_official(official_path(self.data_dir, self.language, split))
                if upstream_path(self.data_dir, V02, UPSTREAM_TASK).is_file():  # read with the tasks: the mock judge
                    self.prompter(self.wording)  # (serve-mock --data-dir) learns upstream's lead-ins; missing: missing_data says so
            else:
                if self.language != "en":
                    raise ConfigError("ltp: the built-in puzzles are English; language=zh needs --data-dir with the official lateralthinkingpuzzle_zh/ files")
                self._cache[split] = load_builtin(environments_dir() / "ltp" / _BUILTIN_FILES[split])
        return self._cache[split], source

    @classmethod
    def read_task_file(cls, path: Path, split: str, options: Mapping[str, Any]) -> Iterator[Task]:
        records = load_builtin(path) if path.suffix == ".jsonl" else load_official(path)
        for record in records:
            data = {**record, "language": str(options.get("language") or "en"), "prompter": str(options.get("prompter") or "en")}
            yield Task(env=cls.name, split=split, task_id=f"custom-{record.get('id') or record['index']}", data=data, source="custom")

    def tasks(self, split: str) -> Iterator[Task]:
        own = self.own_tasks(split)
        if own is not None:
            yield from own
            return
        records, source = self._records(split)
        for record in records:
            task_id = record.get("id") or str(record["index"])  # official: the row index, as upstream
            data = {**record, "language": self.language, "prompter": self.wording}
            yield Task(env=self.name, split=split, task_id=task_id, data=data, source=source)

    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        if ctx.action_mode == "tools":
            raise ConfigError("ltp has no tools mode (AgentBench FC defines no LTP tools); use --action-mode text")
        judge = require_judge(ctx)
        wording = str(task.data.get("prompter", self.wording))
        rounds = self.option_specs["rounds"].read(self.name, "rounds", ctx.options.get("rounds", self.rounds)) if ctx.options else self.rounds
        return LTPSession(task, ctx, judge, self.prompter(wording), rounds, overlap=self.option("overlap", True))


__all__ = ["DEFAULT_ROUNDS", "LTPEnvironment"]
