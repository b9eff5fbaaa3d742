"""The site's reference pages, generated from the code when the site is built (an MkDocs hook named in
mkdocs.yml), so they never drift: every configuration field from the config's own dataclasses, every CLI
subcommand and flag from the argparse parser, every table, column and view from the schema and
``analytics/*.sql``, every status and failure class, every environment option from ``option_specs``.

    python tools/reference_pages.py DIR    # write the pages into DIR (to read them without building the site)
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import duckdb

from agentbench_async import cli, config, statuses
from agentbench_async.analytics import failures
from agentbench_async.distributed import RaySettings
from agentbench_async.envs import available_envs, env_class
from agentbench_async.models import ModelConfig
from agentbench_async.models.batches import BatchSettings
from agentbench_async.resources import analytics_dir
from agentbench_async.store import live, schema

# A field set by a flag of another name (run's dest), or by none (None)
_FLAG_DEST = {"envs": "env", "judge": "judge_model", "env_options": "env_option", "name": "model", "model": None,
              "prompt_caching": "no_prompt_caching"}
GENERATED = "*Generated from the code when the site is built (`tools/reference_pages.py`): it lists every item the code defines.*"


def _cell(text: object) -> str:
    """``text`` fit for one Markdown table cell: one line; outside code spans (a table keeps those whole) ``|`` escaped
    and ``<``/``>`` as entities (help texts write ``<commit>``, which HTML would take for a tag)."""
    parts = " ".join(str(text).split()).split("`")
    plain = lambda s: s.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")  # noqa: E731
    return "`".join(part if i % 2 else plain(part) for i, part in enumerate(parts))


def _code(text: object) -> str:
    return f"`{' '.join(str(text).split())}`" if str(text) else ""


def _table(headers: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    heads = list(headers)
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def field_comments(cls: type) -> dict[str, str]:
    """A dataclass's field comments as written in its source: the comment lines just above a field and the one
    after it on its line."""
    lines, _ = inspect.getsourcelines(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    comments: dict[str, str] = {}
    above: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#").strip())
            continue
        match = re.match(r"\s+(\w+):[^#]*(?:#\s*(.*))?$", line)
        if match and match.group(1) in names and match.group(1) not in comments:
            comments[match.group(1)] = " ".join([*above, match.group(2) or ""]).strip()
        above = []
    return comments


def _default(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        return _code(repr(f.default))
    if f.default_factory is not dataclasses.MISSING:
        return _code(repr(f.default_factory()))
    return "—"


def _flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """dest -> help of a parser's options."""
    return {a.dest: a.help or "" for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _field_rows(cls: type, keys: Iterable[str], flag_help: dict[str, str], flag_of: Callable[[str], str]) -> list[list[str]]:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    comments = field_comments(cls)
    rows = []
    for key in keys:
        f = fields.get(key)  # None: a setting the config reads into other fields (tasks: into env_options)
        dest = _FLAG_DEST.get(key, key)
        flag = flag_of(dest) if dest in flag_help else ""
        meaning = comments.get(key) or flag_help.get(dest or "", "")
        kind, default = (_code(f.type), _default(f)) if f else ("mapping", "—")
        rows.append([_code(key), kind, default, _code(flag) if flag else "", meaning])
    return rows


def configuration_page() -> str:
    run_flags = _flags(_subparsers(cli._parser())["run"])
    flag = lambda key: "--" + key.replace("_", "-")  # noqa: E731
    top = sorted(config._TOP_KEYS)
    model_keys = [f.name for f in dataclasses.fields(ModelConfig) if f.name in config._MODEL_FIELDS]
    heads = ["field", "type", "default", "flag", "meaning"]
    parts = [
        "# Configuration fields\n", GENERATED + "\n",
        "A run is configured by a YAML file (`agentbench run --config FILE`) and/or flags; a flag overrides the file's value. "
        "How the settings work together: [Configuration](../configuration.md).\n",
        "## Run settings (the file's top level)\n",
        _table(heads, _field_rows(config.RunConfig, top, run_flags, flag)),
        "## Model fields (each `models:` entry, and `judge:`)\n",
        "A `--model` flag replaces the file's `models:` list with one model; the model flags apply to every model of the file "
        "otherwise. `--judge-*` flags set the judge's.\n",
        _table(heads, _field_rows(ModelConfig, model_keys, run_flags, flag)),
        "## `batch:` (a model's provider batch settings)\n",
        "`batch: true` takes the defaults, a number is the size, a mapping sets these fields.\n",
        _table(heads, _field_rows(BatchSettings, [f.name for f in dataclasses.fields(BatchSettings)], {}, flag)),
        "## `ray:` (where episodes run)\n",
        "`ray: true`, an address, or a mapping of these fields; `--ray [ADDRESS]` and `--workers N` set them from the command line.\n",
        _table(heads, _field_rows(RaySettings, [f.name for f in dataclasses.fields(RaySettings)], {}, flag)),
    ]
    return "\n".join(parts)


def _argument_rows(parser: argparse.ArgumentParser) -> list[list[str]]:
    rows = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(a.option_strings) if a.option_strings else (a.metavar or a.dest)
        value = "/".join(a.choices) if a.choices and not isinstance(a.choices, dict) else (a.metavar or "")
        if a.option_strings and a.nargs == 0:
            value = ""
        elif a.option_strings and not value:
            value = a.dest.upper()
        default = "" if a.default in (None, False, argparse.SUPPRESS) or not a.option_strings else _code(a.default)
        rows.append([_code(name), _code(value) if value else "", default, a.help or ""])
    return rows


def cli_page() -> str:
    parser = cli._parser()
    parts = ["# CLI\n", GENERATED + "\n", f"`agentbench --help`: {parser.description}\n"]
    commands = _subparsers(parser)
    helps = {c.dest: c.help for a in parser._actions if isinstance(a, argparse._SubParsersAction) for c in a._choices_actions}
    for name, sub in commands.items():
        nested = _subparsers(sub)
        parts.append(f"## `agentbench {name}`\n")
        parts.append(f"{_cell(helps.get(name) or '')}\n")
        parts.append("```text\n" + sub.format_usage().removeprefix("usage: ").strip() + "\n```\n")
        rows = _argument_rows(sub)
        if rows:
            parts.append(_table(["argument", "value", "default", "meaning"], rows))
        nested_helps = {c.dest: c.help for a in sub._actions if isinstance(a, argparse._SubParsersAction) for c in a._choices_actions}
        for child, child_parser in nested.items():
            parts.append(f"### `agentbench {name} {child}`\n")
            parts.append(f"{_cell(nested_helps.get(child) or '')}\n")
            parts.append("```text\n" + child_parser.format_usage().removeprefix("usage: ").strip() + "\n```\n")
            parts.append(_table(["argument", "value", "default", "meaning"], _argument_rows(child_parser)))
    return "\n".join(parts)


def ddl_comments(ddl: str) -> dict[str, dict[str, str]]:
    """table -> column -> the comment written beside it in a ``CREATE TABLE`` text (continuation lines joined)."""
    out: dict[str, dict[str, str]] = {}
    table, column = "", ""
    for line in ddl.splitlines():
        if match := re.match(r"CREATE TABLE IF NOT EXISTS (\w+)", line):
            table = match.group(1)
            out[table] = {}
        elif table and (match := re.match(r"\s+(\w+)\s+[A-Z]+[^-]*?(?:--\s*(.*))?$", line)):
            column = match.group(1)
            out[table][column] = (match.group(2) or "").strip()
        elif table and column and (match := re.match(r"\s+--\s*(.*)$", line)):
            out[table][column] = (out[table][column] + " " + match.group(1)).strip()
        elif line.startswith(")"):
            table, column = "", ""
    return out


def view_comments() -> dict[str, tuple[str, str]]:
    """view -> (its analytics/*.sql file, the comment block just above its ``CREATE OR REPLACE VIEW``)."""
    views = {}
    for path in sorted(analytics_dir().glob("*.sql")):
        above: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("--"):
                above.append(line[2:].strip())
            elif match := re.match(r"CREATE OR REPLACE VIEW (\w+)", line):
                views[match.group(1)] = (path.name, " ".join(above))
                above = []
            else:
                above = []
    return views


def _relations(con: duckdb.DuckDBPyConnection, kind: str) -> list[str]:
    query = f"SELECT {kind}_name FROM duckdb_{kind}s() WHERE NOT internal AND schema_name = 'main' ORDER BY {kind}_name"
    return [r[0] for r in con.execute(query).fetchall()]


def schema_objects() -> tuple[dict[str, list[tuple[str, str]]], dict[str, list[tuple[str, str]]]]:
    """(tables, views) of a new result file: name -> [(column, type)], as ``create_schema`` makes them."""
    con = duckdb.connect()
    try:
        schema.create_schema(con)
        query = "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main' ORDER BY column_index"
        objects = []
        for kind in ("table", "view"):
            objects.append({name: [tuple(r) for r in con.execute(query, [name]).fetchall()] for name in _relations(con, kind)})
        return objects[0], objects[1]
    finally:
        con.close()


def schema_page() -> str:
    tables, views = schema_objects()
    comments = ddl_comments(schema.TABLES_DDL + live.LIVE_TURNS_DDL)
    sql_views = view_comments()
    parts = [
        "# Tables and views\n", GENERATED + "\n",
        "Every result file has these tables (the stored rows) and views (`analytics/*.sql`, recreated on every open, so "
        "an old file gets the current rules). Columns are added at the end, never renamed. Query them with "
        "`agentbench sql FILE \"SELECT ...\"`; how to read them: [Reading results](../reading-results.md), "
        "[The DuckDB file](../schema.md).\n",
        "## Tables\n",
    ]
    for name, columns in tables.items():
        parts.append(f"### `{name}`\n")
        own = comments.get(name, {})
        if name in schema.ATTEMPT_TABLES:  # an earlier attempt's rows: its main table's columns, and which attempt
            source = schema.ATTEMPT_TABLES[name]
            own = {c: f"as in `{source}`: {text}" for c, text in comments.get(source, {}).items()}
            own.update({c: meaning for c, _, meaning in schema.ATTEMPT_COLUMNS})
        rows = [[_code(c), _code(t), own.get(c) or (f"as in `turns`: {comments['turns'].get(c, '')}" if name == "live_turns" else "")]
                for c, t in columns]  # fmt: skip
        parts.append(_table(["column", "type", "meaning"], rows))
    parts.append("## Views\n")
    for name, columns in views.items():
        source, comment = sql_views.get(name, ("", ""))
        parts.append(f"### `{name}`\n")
        if source:
            parts.append(f"From `analytics/{source}`. {_cell(comment)}\n")
        parts.append(_table(["column", "type"], [[_code(c), _code(t)] for c, t in columns]))
    return "\n".join(parts)


def statuses_page() -> str:
    infra = set(failures.INFRA_CLASSES)
    status_rows = [[_code(s), statuses.MEANINGS[s], "yes" if s in statuses.RETRY_ON_RESUME else "no",
                    _code(statuses.DEFAULT_PAPER_STATUS[s]) if s in statuses.DEFAULT_PAPER_STATUS else "none"]
                   for s in statuses.ALL_STATUSES]  # fmt: skip
    class_rows = [[_code(c), "infrastructure: never scored" if c in infra else "the model's outcome: counts in scores",
                   failures.CLASS_MEANINGS[c]] for c in failures.FAILURE_CLASSES]  # fmt: skip
    parts = [
        "# Statuses and failure classes\n", GENERATED + "\n",
        "## Statuses (`episodes.status`)\n",
        "Every episode ends with one of these words (a contract: users' SQL relies on them). An infrastructure ending is "
        "never scored against the model and runs again when the run is resumed.\n",
        _table(["status", "meaning", "re-run on resume", "AgentBench v0.2's word (default `paper_status`)"], status_rows),
        "## AgentBench v0.2's statuses (`episodes.paper_status`)\n",
        "What upstream would have recorded for the same episode (its `SampleStatus`), stored by each environment: "
        + ", ".join(_code(s) for s in statuses.PAPER_STATUSES) + ". The paper's five-column outcome table "
        "(`paper_failure_table`) is built from them: " + ", ".join(f"{_code(c)} ({failures.PAPER_TITLES[c]})" for c in failures.PAPER_COLUMNS) + ".\n",
        "## Failure classes (`episode_outcomes.failure_class`)\n",
        "What the reports, `view` and the `failure_classes` view count: the status, with `completed` split by the answer.\n",
        _table(["failure class", "kind", "meaning"], class_rows),
    ]
    return "\n".join(parts)


def _option_values(option: Any) -> str:
    if option.kind == "int":
        return f"integer >= {int(option.minimum)}" + (f", <= {option.maximum}" if option.maximum is not None else "")
    if option.kind == "number":
        return f"number {'>' if option.above else '>='} {option.minimum:g}"
    if option.kind == "bool":
        return "true or false"
    if option.kind == "choice":
        return "one of " + ", ".join(option.choices)
    if option.kind == "range":
        return "START:END (0 <= START < END)"
    if option.kind == "url":
        return "a URL: " + " or ".join(f"{s}://" for s in option.schemes)
    return "text or a list of texts" if option.kind == "texts" else "text"


def env_option_specs() -> dict[str, dict[str, Any]]:
    """Every built-in environment's declared options (``Environment.option_specs``)."""
    return {env: dict(env_class(env).option_specs or {}) for env in available_envs()}


def env_options_page() -> str:
    parts = [
        "# Environment options\n", GENERATED + "\n",
        "Set as `--env-option ENV.KEY=VALUE` (repeatable) or in the config file's `env_options: {ENV: {KEY: VALUE}}`. Every "
        "option is checked against its environment's declaration before anything starts: an unknown name or a bad value is one "
        "line naming it and what is valid. What each option does: the environment's page.\n",
    ]
    for env, specs in env_option_specs().items():
        parts.append(f"## `{env}`\n")
        if not specs:
            parts.append("No options.\n")
            continue
        rows = [[_code(f"{env}.{key}"), _option_values(opt), opt.meaning] for key, opt in specs.items()]
        parts.append(_table(["option", "value", "meaning"], rows))
        parts.append(f"More: [the `{env}` environment](../envs/{env}.md).\n")
    return "\n".join(parts)


def pages() -> dict[str, str]:
    """Site path (under docs/) -> Markdown of every generated reference page."""
    return {
        "reference/configuration.md": configuration_page(),
        "reference/cli.md": cli_page(),
        "reference/schema.md": schema_page(),
        "reference/statuses.md": statuses_page(),
        "reference/env-options.md": env_options_page(),
    }


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated pages to the site's files (before the nav is built)."""
    from mkdocs.structure.files import File

    for path, text in pages().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=text))
    return files


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for rel, text in pages().items():
        target = Path(sys.argv[1]) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(target)
