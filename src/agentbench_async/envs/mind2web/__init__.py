"""``mind2web``: AgentBench's Web Browsing environment (Mind2Web, "WB"), multiple-choice element selection.

One episode is one step of a Mind2Web task (AgentBench evaluates each step on its own, with the gold
history as previous actions): the ranker's top 10 candidate elements are played off in rounds of five
choices plus "None of the above", each round a fresh 3-shot conversation; the final pick and its action
are compared with the gold element and operation. Score = step success (1/0); the mean over episodes is
AgentBench's ``step_sr`` (a micro-average over steps). Element accuracy and action F1 are in ``details``.

Tasks: the built-in suite (``environments/mind2web/``: authored pages in Mind2Web's format) or, with
``--mind2web-data DIR``, the Mind2Web download (``data_dev/*.json``, ``data_std/*.json``,
``scores_all_data.pkl``). Few-shot prompt: AgentBench's file from ``--data-dir`` when given
(``mind2web/prompt/llm_prompt_cot.json``), else the project's own examples — also with ``--mind2web-data``,
which then runs with the named deviation ``mind2web.prompts``.

Options (``--env-option mind2web.KEY=VALUE``):
    ``mind2web_data``  the Mind2Web data folder (``--mind2web-data DIR``)
    ``prompt``         ``cot`` (default, v0.2's ``llm_prompt_cot.json``) or ``plain`` (``llm_prompt.json``)
    ``range_min``, ``range_max``  evaluate only samples with ``range_min <= index < range_max``
                       (default with ``--mind2web-data``: upstream's 0..99; the built-in suite: every sample)
    ``capacity``       episodes at once (default 1000)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...environment import ConfigError, Deviation, Environment, EpisodeContext, Option, Session, Task, missing_file
from ...resources import environments_dir
from .data import load_samples, load_scores, score_file, split_files
from .prompts import PROMPT_FILES, FewShot, load_prompt, prompt_path
from .session import Mind2WebSession

MAX_ROUNDS = 3  # a pool of at most 10 shrinks 10 -> 6 -> 2 -> 1 when every round picks
_DEFAULT_CAPACITY = 1000


def builtin_dir() -> Path:
    return environments_dir() / "mind2web"


class Mind2WebEnvironment(Environment):
    name: ClassVar[str] = "mind2web"
    description: ClassVar[str] = "Web Browsing (Mind2Web): pick the next element and action on a real page, multiple choice"
    max_turns: ClassVar[int] = MAX_ROUNDS
    metric: ClassVar[str] = "step success rate"
    supports_tools: ClassVar[bool] = False  # AgentBench FC defines no Mind2Web tools
    requires: ClassVar[str] = "nothing (built-in pages); official steps: the Mind2Web data via --mind2web-data DIR"
    # upstream's Mind2Web.__init__ defaults (its configs never set them): samples 0..99 of the split
    result_options: ClassVar[dict[str, Any]] = {"prompt": "cot", "range_min": 0, "range_max": 100}
    option_specs: ClassVar[dict[str, Option]] = {
        "mind2web_data": Option("text", "the Mind2Web data folder"),
        "prompt": Option("choice", "v0.2's chain-of-thought prompt file or the plain one", choices=tuple(PROMPT_FILES)),
        "range_min": Option("int", "a sample index", minimum=0),
        "range_max": Option("int", "a sample index", minimum=0),
        "capacity": Option("int", "episodes at once"),
    }

    def __init__(self, *, data_dir: Path | None = None, options: dict[str, Any] | None = None) -> None:
        super().__init__(data_dir=data_dir, options=options)
        self._variant: str = self.option("prompt", "cot")
        data = self.options.get("mind2web_data")
        official = (self.result_options["range_min"], self.result_options["range_max"]) if data else (None, None)
        self._range: tuple[int | None, int | None] = (self.option("range_min", official[0]), self.option("range_max", official[1]))
        self._folder = Path(str(data)).expanduser() if data else builtin_dir()
        if data and not self._folder.is_dir():
            raise ConfigError(f"mind2web: --mind2web-data {self._folder} is not a directory (the Mind2Web download: data_dev/, data_std/, scores_all_data.pkl)")
        self._source = "official" if data else "builtin"
        self._ranking: dict[str, Any] | None = None
        self._samples: dict[str, list[dict[str, Any]]] = {}
        self._few_shot: FewShot | None = None

    @property
    def capacity(self) -> int:
        return int(self.option("capacity", _DEFAULT_CAPACITY))

    @property
    def few_shot(self) -> FewShot:
        """The prompt file: AgentBench's from ``--data-dir``, else the project's own."""
        if self._few_shot is None:
            folder = self.data_dir if self.data_dir is not None else builtin_dir()
            self._few_shot = load_prompt(prompt_path(folder, self._variant))
        return self._few_shot

    def samples(self, split: str) -> list[dict[str, Any]]:
        if split not in self._samples:
            split_files(self._folder, split)  # the task files first: a wrong folder fails before the big pickle loads
            if self._ranking is None:
                self._ranking = load_scores(score_file(self._folder))
            self._samples[split] = load_samples(self._folder, split, self._ranking)
        return self._samples[split]

    @classmethod
    def plays_official_tasks(cls, data_dir: object, options: dict[str, Any]) -> bool:
        return bool(options.get("mind2web_data"))  # --data-dir gives only the prompt file

    @classmethod
    def missing_data(cls, data_dir: Path, options: Mapping[str, Any], split: str, action_mode: str) -> str | None:
        return missing_file([prompt_path(data_dir, str(options.get("prompt") or "cot"))])  # the steps come from --mind2web-data

    @classmethod
    def deviations(cls, data_dir: object, options: dict[str, Any], action_mode: str) -> list[Deviation]:
        mine = ("mind2web",)
        out = []
        if options.get("mind2web_data"):  # upstream's own unseeded draw: recorded, never reproduced
            out.append(Deviation("mind2web.shuffle", "each step's candidates shuffled by a generator seeded per sample (123-<index>)",
                                 "one process-global random seeded once: a step's order depends on the steps its worker ran before",
                                 "candidate order differs", envs=mine))  # fmt: skip
        # --mind2web-data without --data-dir runs (the steps are the official ones) with this named difference
        if not data_dir:
            out.append(Deviation("mind2web.prompts", "the project's own three worked examples", "llm_prompt_cot.json's, read "
                                 "from --data-dir", "prompt wording differs", envs=mine))  # fmt: skip
        return out

    def tasks(self, split: str) -> Iterator[Task]:
        self.few_shot  # noqa: B018 - the prompt file is read with the tasks: a missing one is one line before the run, not an error per episode
        low, high = self._range
        for sample in self.samples(split):
            if (low is None or sample["index"] >= low) and (high is None or sample["index"] < high):
                yield Task(env=self.name, split=split, task_id=sample["sid"], data=sample, source=self._source)

    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        if ctx.action_mode == "tools":
            raise ConfigError("mind2web has no tools mode (AgentBench FC defines no Mind2Web tools); use --action-mode text")
        return Mind2WebSession(task, self.few_shot)


__all__ = ["MAX_ROUNDS", "Mind2WebEnvironment", "builtin_dir"]
