"""``kg``: AgentBench's Knowledge Graph environment (questions over Freebase, seven tools, answer F1).

Every tool runs as SPARQL (one query builder, ``sparql.py``) against one of two backends
(``backends.py``): an embedded pyoxigraph store loaded once per run from the built-in Freebase-shaped
graph (``environments/kg/graph.nt``, default) or a file given by the ``kg_graph`` option; or any SPARQL
1.1 endpoint given by the ``kg_endpoint`` option (``--kg-endpoint URL``), which is how the official
questions run against a full Freebase in Virtuoso.

Options (``Environment(options=...)``, from CLI flags / config):
  ``kg_endpoint``  SPARQL endpoint URL (http/https)
  ``kg_graph``     N-Triples/Turtle file(s) for the embedded store (a path, or a list of paths)
  ``kg_ontology``  folder with vocab.json / fb_roles (default: ``<data-dir>/knowledgegraph/ontology`` for
                   official data, else the built-in graph's own ``environments/kg/ontology``)
  ``kg_timeout``   seconds per endpoint query (default 120)
  ``kg_max_queries`` endpoint queries in flight at once (default 16)
  ``kg_capacity``  episodes at once (default 1000)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...environment import Deviation, EnvError, EnvUnavailableError, Environment, EpisodeContext, Option, Session, Task, missing_file
from ..upstream_prompts import FC, V02, upstream_path, wording_deviations
from .backends import HttpSparqlBackend, OxigraphBackend, SparqlBackend
from .ontology import Ontology, load_ontology
from .prompts import FC_API, FC_CONST, FC_TASK, V02_TASK, Prompts, load_prompts
from .session import KGSession
from .tasks import builtin_dir, load_tasks, official_dir, own_file_tasks, task_file
from .tools import Toolbox

__all__ = ["KGEnvironment"]


class KGEnvironment(Environment):
    name: ClassVar[str] = "kg"
    description: ClassVar[str] = "Knowledge Graph: answer questions over Freebase with 7 SPARQL-backed tools (AgentBench KG)"
    max_turns: ClassVar[int] = 15
    # AgentBench's KB is Freebase (reached with kg_endpoint, an operational setting); another graph or ontology is not
    result_options: ClassVar[dict[str, Any]] = {"kg_graph": None, "kg_ontology": None}
    metric: ClassVar[str] = "F1"
    supports_tools: ClassVar[bool] = True
    requires: ClassVar[str] = (
        "pyoxigraph (built-in graph); official tasks: a Freebase SPARQL endpoint via --kg-endpoint URL (e.g. Virtuoso)"
    )
    task_file_format: ClassVar[str] = "a JSON list of AgentBench knowledgegraph records (question, entities, answer), as data/knowledgegraph/dev.json"
    option_specs: ClassVar[dict[str, Option]] = {
        "kg_endpoint": Option("url", "a SPARQL 1.1 endpoint"),
        "kg_graph": Option("texts", "N-Triples/Turtle file(s) for the embedded store"),
        "kg_ontology": Option("text", "folder with vocab.json and fb_roles"),
        "kg_timeout": Option("number", "seconds per endpoint query", minimum=0),
        "kg_max_queries": Option("int", "endpoint queries in flight at once"),
        "kg_capacity": Option("int", "episodes at once"),
    }

    @classmethod
    def missing_data(cls, data_dir: Path, options: Mapping[str, Any], split: str, action_mode: str) -> str | None:
        ontology = Path(str(options["kg_ontology"])) if options.get("kg_ontology") else official_dir(data_dir) / "ontology"
        wording = [upstream_path(data_dir, FC, f) for f in (FC_CONST, "configs/tasks/kg.yaml", FC_TASK, FC_API)] if action_mode == "tools" \
            else [upstream_path(data_dir, V02, V02_TASK)]  # fmt: skip
        missing = missing_file([task_file(split, data_dir), ontology / "vocab.json", ontology / "fb_roles", *wording])
        if missing is None and not options.get("kg_endpoint") and not options.get("kg_graph"):
            return "the official questions need Freebase, which is not bundled: no --kg-endpoint URL"
        return missing

    @classmethod
    def deviations(cls, data_dir: object, options: dict[str, Any], action_mode: str) -> list[Deviation]:
        return wording_deviations("kg", data_dir, action_mode, upstream="upstream's instructions, acknowledgement and one-shot thoughts",
                                  text="the project's own instructions, acknowledgement and one-shot thoughts",
                                  tools="the project's own descriptions of the seven tools", fc_text=True)  # fmt: skip

    def prompts(self, action_mode: str) -> Prompts:
        """The run's wording in ``action_mode`` (AgentBench's from ``--data-dir``, else the project's), read once."""
        if action_mode not in self._prompts:
            self._prompts[action_mode] = load_prompts(self.data_dir, action_mode)
        return self._prompts[action_mode]

    def __init__(self, *, data_dir: Path | None = None, options: dict[str, Any] | None = None) -> None:
        super().__init__(data_dir=data_dir, options=options)
        self._prompts: dict[str, Prompts] = {}
        self._backend: SparqlBackend | None = None
        self._ontology: Ontology | None = None

    @property
    def capacity(self) -> int:
        # A session is a few small Python objects; the backend bounds the real work (2 query threads
        # embedded, ``kg_max_queries`` requests in flight to an endpoint).
        return int(self.option("kg_capacity", 1000))

    @classmethod
    def read_task_file(cls, path: Path, split: str, options: Mapping[str, Any]) -> Iterator[Task]:
        return own_file_tasks(path, split)

    def tasks(self, split: str) -> Iterator[Task]:
        return self.own_tasks(split) or load_tasks(split, self.data_dir)

    def _ontology_dir(self) -> Path:
        if self.option("kg_ontology"):
            return Path(self.option("kg_ontology"))
        if self.data_dir is not None:
            return official_dir(self.data_dir) / "ontology"
        return builtin_dir() / "ontology"

    def _graph_files(self) -> list[Path]:
        graph = self.option("kg_graph")
        if not graph:
            return [builtin_dir() / "graph.nt"]
        if isinstance(graph, (list, tuple)):
            return [Path(g) for g in graph]
        return [Path(p) for p in str(graph).split(",") if p]

    async def start(self) -> None:
        endpoint = self.option("kg_endpoint")
        if endpoint:
            backend: SparqlBackend = HttpSparqlBackend(
                str(endpoint),
                timeout_s=float(self.option("kg_timeout", 120)),
                max_in_flight=int(self.option("kg_max_queries", 16)),
            )
            await backend.check()  # type: ignore[attr-defined]
        elif self.data_dir is not None and not self.options.get("kg_graph"):
            raise EnvUnavailableError(
                "kg: the official questions need Freebase, which is not bundled: load Freebase into Virtuoso "
                "(dki-lab/Freebase-Setup) and pass --kg-endpoint http://HOST:PORT/sparql "
                "(without --data-dir the built-in graph runs embedded)"
            )
        else:
            backend = await OxigraphBackend.load(self._graph_files())
        try:
            self._ontology = await asyncio.to_thread(load_ontology, self._ontology_dir())
        except Exception:
            await backend.close()
            raise
        self._backend = backend

    async def close(self) -> None:
        if self._backend is not None:
            await self._backend.close()
            self._backend = None

    @property
    def backend_description(self) -> str:
        return self._backend.description if self._backend is not None else "not started"

    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        if self._backend is None or self._ontology is None:
            raise EnvError("kg: environment not started (Environment.start() loads the graph or connects to the endpoint)")
        return KGSession(task, ctx, Toolbox(self._backend, self._ontology), self.prompts(ctx.action_mode))
