"""The generated reference pages list every item of what they document, compared with the code's own lists:
the configuration dataclasses, the CLI parser, a new result file's tables/columns and ``analytics/*.sql``'s views,
the status and failure-class vocabularies, every environment's ``option_specs``."""

from __future__ import annotations

import argparse
import dataclasses
import re
import runpy
from pathlib import Path

import duckdb
import pytest

from support import REPO

from agentbench_async import cli, config, statuses
from agentbench_async.analytics import failures
from agentbench_async.distributed import RaySettings
from agentbench_async.envs import available_envs, env_class
from agentbench_async.models import ModelConfig
from agentbench_async.models.batches import BatchSettings
from agentbench_async.store.schema import create_schema


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return runpy.run_path(str(REPO / "tools" / "reference_pages.py"))["pages"]()


def _sections(page: str, level: str) -> dict[str, str]:
    """Heading text (backticks dropped) -> the text under it, for headings of exactly ``level`` (e.g. '##')."""
    parts = re.split(rf"^{level} (.+)$", page, flags=re.M)
    return {parts[i].replace("`", "").strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _rows(section: str) -> dict[str, list[str]]:
    """First cell (backticks dropped) -> the row's cells, for every body row of the section's tables."""
    rows = {}
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|(?=(?:[^`]*`[^`]*`)*[^`]*$)", line.strip()[1:-1])]
            rows[cells[0].strip("`")] = cells
    return rows


def test_configuration_page_lists_every_field_with_its_default_and_a_meaning(pages: dict[str, str]) -> None:
    sections = _sections(pages["reference/configuration.md"], "##")
    expected = {
        "Run settings (the file's top level)": (config.RunConfig, sorted(config._TOP_KEYS)),
        "Model fields (each models: entry, and judge:)": (ModelConfig, sorted(config._MODEL_FIELDS)),
        "batch: (a model's provider batch settings)": (BatchSettings, [f.name for f in dataclasses.fields(BatchSettings)]),
        "ray: (where episodes run)": (RaySettings, [f.name for f in dataclasses.fields(RaySettings)]),
    }
    assert set(sections) == set(expected)
    for title, (cls, names) in expected.items():
        rows = _rows(sections[title])
        assert sorted(rows) == sorted(["field", *names]), title  # every field, nothing else
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for name in names:
            _, _, default, _, meaning = rows[name]
            assert meaning, f"{title}: {name} has no meaning (a comment beside the field, or its flag's help)"
            f = fields.get(name)  # none for tasks: (read into env_options)
            if f is not None and f.default is not dataclasses.MISSING:
                assert default == f"`{f.default!r}`", (name, default)
    models = _rows(sections["Model fields (each models: entry, and judge:)"])
    assert models["retry_after_max_s"][1:4] == ["`float`", "`120.0`", ""]  # a field the run flags do not set
    assert models["name"][3] == "`--model`" and models["prompt_caching"][3] == "`--no-prompt-caching`"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((dict(a.choices) for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def test_cli_page_lists_every_subcommand_and_every_flag(pages: dict[str, str]) -> None:
    page = pages["reference/cli.md"]
    commands = _sections(page, "##")
    parser = cli._parser()
    assert sorted(commands) == sorted(f"agentbench {name}" for name in _subcommands(parser))
    for name, sub in _subcommands(parser).items():
        section = commands[f"agentbench {name}"]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or isinstance(action, argparse._SubParsersAction):
                continue
            shown = ", ".join(action.option_strings) or action.metavar or action.dest
            assert f"| `{shown}` |" in section, (name, shown)
        for child, child_parser in _subcommands(sub).items():  # data pull
            nested = _sections(section, "###")[f"agentbench {name} {child}"]
            for action in child_parser._actions:
                if action.option_strings and not isinstance(action, argparse._HelpAction):
                    assert f"| `{', '.join(action.option_strings)}` |" in nested, (name, child, action.option_strings)
    for title, section in commands.items():
        for name, row in _rows(section).items():
            assert name == "argument" or row[3], f"{title} {name}: no help text"
    run = _rows(commands["agentbench run"])
    assert run["--max-concurrency"][3] == "episodes in flight in total (default 256)"
    pull = _rows(_sections(commands["agentbench data"], "###")["agentbench data pull"])
    assert pull["--base-url"][3] == "mirror serving &lt;commit&gt;/&lt;path&gt; (default: GitHub raw files)"  # not an HTML tag


def test_schema_page_lists_every_table_column_and_view_of_a_new_result_file(pages: dict[str, str], tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "new.duckdb"))
    create_schema(con)
    columns: dict[str, list[str]] = {}
    for table, column in con.execute("SELECT table_name, column_name FROM duckdb_columns() WHERE schema_name = 'main' AND NOT internal "
                                     "ORDER BY table_name, column_index").fetchall():  # fmt: skip
        columns.setdefault(table, []).append(column)
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
    con.close()
    page = pages["reference/schema.md"]
    top = _sections(page, "##")
    documented_tables, documented_views = _sections(top["Tables"], "###"), _sections(top["Views"], "###")
    assert set(documented_tables) == tables >= {"runs", "episodes", "turns", "model_calls", "batches", "live_turns"}
    sql_views = {m for p in (REPO / "analytics").glob("*.sql") for m in re.findall(r"CREATE OR REPLACE VIEW (\w+)", p.read_text())}
    assert set(documented_views) == set(columns) - tables == sql_views
    for name, section in {**documented_tables, **documented_views}.items():
        assert [c for c in _rows(section) if c != "column"] == columns[name], name  # every column, in order
    episodes = _rows(documented_tables["episodes"])
    assert "'&lt;model&gt;/&lt;env&gt;/&lt;split&gt;/&lt;task_id&gt;/&lt;repeat&gt;'" in episodes["episode_id"][2]  # the schema's comment
    assert all(row[2] for name, row in _rows(documented_tables["model_calls"]).items() if name not in ("column", "run_id", "episode_id",
               "turn", "latency_ms", "output_tokens", "error", "model", "finish_reason", "started_at"))  # fmt: skip
    assert "From `analytics/20_scores.sql`." in documented_views["env_scores"]


def test_statuses_page_lists_every_status_paper_status_and_failure_class(pages: dict[str, str]) -> None:
    sections = _sections(pages["reference/statuses.md"], "##")
    status_rows = _rows(sections["Statuses (episodes.status)"])
    assert [s for s in status_rows if s != "status"] == list(statuses.ALL_STATUSES)
    assert set(statuses.MEANINGS) == set(statuses.ALL_STATUSES)
    for status, row in status_rows.items():
        if status != "status":
            assert row[2] == ("yes" if status in statuses.RETRY_ON_RESUME else "no"), status
    assert status_rows["cancelled"][3] == "none" and status_rows["model_error"][3] == "`task error`"
    for paper in statuses.PAPER_STATUSES:
        assert f"`{paper}`" in sections["AgentBench v0.2's statuses (episodes.paper_status)"], paper
    class_rows = _rows(sections["Failure classes (episode_outcomes.failure_class)"])
    assert [c for c in class_rows if c != "failure class"] == list(failures.FAILURE_CLASSES)
    assert set(failures.CLASS_MEANINGS) == set(failures.FAILURE_CLASSES)
    assert class_rows["env_error"][1] == "infrastructure: never scored"


def test_environment_options_page_lists_every_option_of_every_environment(pages: dict[str, str]) -> None:
    sections = _sections(pages["reference/env-options.md"], "##")
    assert list(sections) == available_envs() and len(sections) == 8
    for env, section in sections.items():
        specs = env_class(env).option_specs or {}
        rows = _rows(section)
        assert sorted(r for r in rows if r != "option") == sorted(f"{env}.{key}" for key in specs), env
        for key, option in specs.items():
            assert rows[f"{env}.{key}"][2] == option.meaning, (env, key)
    assert "one of v0.2, fc" in _rows(sections["alfworld"])["alfworld.official_variant"][1]
