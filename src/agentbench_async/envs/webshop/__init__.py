"""``webshop``: AgentBench's Web Shopping environment (WebShop's text site, in-process).

The agent gets a shopping instruction, searches a product catalog (BM25), opens products, reads their
sub-pages, chooses options and buys; the score is WebShop's purchase reward in [0, 1] (mean × 100 = the
paper's WS column). No web server, no Java: pages, actions, search and reward are this package's own code
(see docs/envs/webshop.md). The catalog and its search index are loaded once per environment and shared by
all episodes; an episode holds only its place on the site.

Options (``Environment(options=...)``, from the run config / CLI):

- ``webshop_data``: a folder with WebShop's ``items_shuffle.json``, ``items_ins_v2.json`` and
  ``items_human_ins.json`` (``--webshop-data DIR``); without it the built-in catalog runs;
- ``test_range`` / ``dev_range``: goal indices of each split as ``START:END`` (default ``0:200`` and
  ``200:280``, AgentBench's std and dev);
- ``price_seed``: seed of the sampled product prices and goal price bounds (default 0);
- ``nouns``: who tags the nouns of titles without precomputed ones for the reward: ``spacy`` (upstream's way)
  or ``heuristic``; not given, the run stores ``spacy`` when spaCy and the model are installed, else
  ``heuristic`` (a named deviation; see ``nouns.py``);
- ``spacy_model``: the spaCy model (default ``en_core_web_lg``; a package name or a model folder);
- ``capacity``: episodes at once (default 1000).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...environment import Deviation, Environment, EpisodeContext, Option, Session, Task, TaskFileError, missing_file
from ..upstream_prompts import FC, V02, tool_replies_deviation, upstream_path, wording_deviations
from .catalog import DEFAULT_PRICE_SEED, Catalog, load_catalog
from .nouns import DEFAULT_SPACY_MODEL, SOURCES, default_source, noun_tagger
from .protocol import FC_ROUNDS, FC_TASK, MAX_ROUNDS, UPSTREAM_TASK, Prompts, ToolTexts, load_prompts, load_tool_texts
from .session import WebShopSession
from .site import Shop
from .tasks import DataSource, data_source, make_tasks

_DEFAULT_CAPACITY = 1000


class WebShopEnvironment(Environment):
    name: ClassVar[str] = "webshop"
    description: ClassVar[str] = "Web Shopping (WebShop): search a catalog, pick a product and its options, buy it"
    max_turns: ClassVar[int] = FC_ROUNDS  # tools mode's (AgentBench FC); text sessions stop at v0.2's 10 rounds
    turn_caps: ClassVar[Mapping[str, int]] = {"text": MAX_ROUNDS, "tools": FC_ROUNDS}
    metric: ClassVar[str] = "reward"
    supports_tools: ClassVar[bool] = True
    requires: ClassVar[str] = "nothing (numpy, rapidfuzz); official goals: WebShop's data files via --webshop-data DIR"
    # goal ranges as v0.2's configs (std 0:200, dev 200:280); upstream's prices were unseeded, so any price_seed given
    # is named (the default seed is this project's documented difference)
    result_options: ClassVar[dict[str, Any]] = {"test_range": "0:200", "dev_range": "200:280", "price_seed": None,
                                                "spacy_model": DEFAULT_SPACY_MODEL}
    option_specs: ClassVar[dict[str, Option]] = {
        "webshop_data": Option("text", "WebShop's data folder"),
        "test_range": Option("range", "goal indices of the test split, default 0:200"),
        "dev_range": Option("range", "goal indices of the dev split, default 200:280"),
        "price_seed": Option("int", "seed of the sampled prices", minimum=0),
        "nouns": Option("choice", "who tags title nouns for the reward", choices=SOURCES),
        "spacy_model": Option("text", "spaCy model for the nouns of titles"),
        "capacity": Option("int", "episodes at once"),
    }

    def __init__(self, *, data_dir: Path | None = None, options: dict[str, Any] | None = None) -> None:
        super().__init__(data_dir=data_dir, options=options)
        self._price_seed: int = self.option("price_seed", DEFAULT_PRICE_SEED)
        self._capacity: int = self.option("capacity", _DEFAULT_CAPACITY)
        self._lock = threading.Lock()
        self._catalog: Catalog | None = None
        self._shop: Shop | None = None
        self._prompts: Prompts | None = None
        self._tool_texts: ToolTexts | None = None

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def source(self) -> DataSource:
        """Where the catalog comes from (raises TaskFileError if --data-dir has no WebShop files)."""
        return data_source(self.options, self.data_dir)

    def catalog(self) -> Catalog:
        """The products and goals, loaded on first use (the tasks need the goals, episodes the products)."""
        with self._lock:
            if self._catalog is None:
                self._catalog = load_catalog(self.source.folder, price_seed=self._price_seed)
            return self._catalog

    def shop(self) -> Shop:
        """The catalog with its search index and noun tagger (built once; blocking — call from a thread)."""
        catalog = self.catalog()
        with self._lock:
            if self._shop is None:
                if any(p.title_nouns is None for p in catalog.products):
                    model = self.option("spacy_model", DEFAULT_SPACY_MODEL)
                    nouns, source = noun_tagger(self.option("nouns") or default_source(model), model)
                else:  # the built-in catalogue carries its titles' nouns
                    nouns, source = noun_tagger("heuristic")[0], "precomputed"
                self._shop = Shop(catalog, nouns, source)
            return self._shop

    @classmethod
    def plays_official_tasks(cls, data_dir: object, options: dict[str, Any]) -> bool:
        return bool(options.get("webshop_data") or data_dir)  # --data-dir without WebShop files is refused

    @classmethod
    def missing_data(cls, data_dir: Path, options: Mapping[str, Any], split: str, action_mode: str) -> str | None:
        files = [upstream_path(data_dir, V02, UPSTREAM_TASK)]
        if action_mode == "tools":
            files += [upstream_path(data_dir, FC, "configs/tasks/webshop.yaml"), upstream_path(data_dir, FC, FC_TASK)]
        try:
            data_source(dict(options), data_dir)
        except TaskFileError:
            return missing_file(files) or "WebShop's catalogue and goals are a separate download: no --webshop-data DIR"
        return missing_file(files)

    @classmethod
    def settled_options(cls, data_dir: Path | None, options: Mapping[str, Any]) -> dict[str, Any]:
        """With WebShop's data (titles without nouns) and no ``nouns`` option: spaCy if installed here, else the
        heuristic, stored with the run."""
        settled = dict(options)
        if "nouns" not in settled and cls.plays_official_tasks(data_dir, settled):
            settled["nouns"] = default_source(str(settled.get("spacy_model", DEFAULT_SPACY_MODEL)))
        return settled

    @classmethod
    def deviations(cls, data_dir: object, options: dict[str, Any], action_mode: str) -> list[Deviation]:
        out = wording_deviations("webshop", data_dir, action_mode, upstream="upstream's rules and L'eau d'Issey one-shot",
                                 text="the project's own rules and one-shot purchase",
                                 tools="the project's own search_action/click_action descriptions", fc_text=True)  # fmt: skip
        if action_mode == "tools":
            out.append(tool_replies_deviation("webshop", "calls AgentBench FC does not run get a 'Not executed' tool message"))
        if cls.plays_official_tasks(data_dir, options) and options.get("nouns") == "heuristic":
            out.append(Deviation("webshop.nouns", "heuristic (the title's content words)", "spaCy en_core_web_lg's NOUN/PROPN tags",
                                 "the reward's title score is approximate", envs=("webshop",)))  # fmt: skip
        return out

    def tasks(self, split: str) -> Iterator[Task]:
        return make_tasks(self.name, split, self.catalog(), self.source, self.options)

    @property
    def prompts(self) -> Prompts:
        """AgentBench's wording (from the upstream files ``agentbench data pull`` puts under --data-dir), else ours."""
        if self._prompts is None:
            self._prompts = load_prompts(self.data_dir)
        return self._prompts

    def tool_texts(self) -> ToolTexts:
        """Tools mode's wording besides the tools: AgentBench FC's (its pulled webshop/task.py), else ours; read once."""
        if self._tool_texts is None:
            self._tool_texts = load_tool_texts(self.data_dir)
        return self._tool_texts

    async def start(self) -> None:
        _ = self.prompts  # a missing upstream file fails the start, naming it
        await asyncio.to_thread(self.shop)

    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        shop = self._shop if self._shop is not None else await asyncio.to_thread(self.shop)
        texts = self.tool_texts() if ctx.action_mode == "tools" else None
        return WebShopSession(shop, task, ctx, self.prompts, *([texts] if texts else []))


__all__ = ["WebShopEnvironment"]
