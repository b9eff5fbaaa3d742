"""Task records: the official AgentBench OS files (``--data-dir``) and the built-in suites.

Both use the official record format (``description``, ``create``, ``start``, ``evaluation``); see
``docs/envs/os.md``. Loading normalises every script object to ``{"language", "code"}`` (``file``
references resolve through :mod:`.scripts`; a comparison check has language ``compare``), so a bad record
fails here with one line naming the file, record and field, not in the middle of an episode.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...environment import Task, TaskFileError, read_json
from ...resources import environments_dir
from .scripts import script_file

STD_GROUPS = tuple(str(g) for g in range(1, 8))
_LANGS = ("bash", "python")


def official_root(data_dir: Path) -> Path:
    """``<data-dir>/os_interaction/data`` (or ``data_dir`` itself if it already is that folder)."""
    for cand in (data_dir / "os_interaction" / "data", data_dir / "data", data_dir):
        if (cand / "dev.json").is_file():
            return cand
    raise TaskFileError(f"os: no os_interaction/data/dev.json under --data-dir {data_dir}; point it at the AgentBench data folder")


def _read_records(path: Path) -> list[Any]:
    data = read_json(path, missing=f"os: cannot read task file {path}: no such file", where=f"os: task file {path}")  # bounded
    return data if isinstance(data, list) else [data]


def _script(obj: Any, where: str, *, check: bool = False) -> dict[str, str]:
    if isinstance(obj, str):
        return {"language": "bash", "code": obj}
    if isinstance(obj, dict):
        if "file" in obj:
            found = script_file(str(obj["file"]))
            if found is None:
                raise TaskFileError(f"os: {where}: unknown script file {obj['file']!r}; use inline code or a known file")
            if found["language"] == "compare" and not check:
                raise TaskFileError(
                    f"os: {where}: {obj['file']!r} compares a check's parameters and runs only as a step of evaluation.check"
                )
            return dict(found)
        lang = str(obj.get("language", "bash"))
        if lang not in _LANGS:
            raise TaskFileError(f"os: {where}: language {lang!r} is not supported (use bash or python)")
        if not isinstance(obj.get("code"), str):
            raise TaskFileError(f"os: {where}: a script object needs a 'code' string or a 'file'")
        return {"language": lang, "code": obj["code"]}
    raise TaskFileError(f"os: {where}: a script must be a string or an object, not {type(obj).__name__}")


def normalise(record: Any, where: str) -> dict[str, Any]:
    """Check one record and return the session's view of it."""
    if not isinstance(record, dict) or not isinstance(record.get("description"), str):
        raise TaskFileError(f"os: {where}: a record needs a 'description' string")
    ev = record.get("evaluation")
    if not isinstance(ev, dict) or ("match" not in ev and "check" not in ev):
        raise TaskFileError(f"os: {where}: 'evaluation' needs 'match' or 'check'")
    create = record.get("create")
    init_raw: Any = create.get("init") if isinstance(create, dict) else None  # a list-valued create: no init (v0.2)
    inits = [] if init_raw is None else init_raw if isinstance(init_raw, list) else [init_raw]
    out: dict[str, Any] = {
        "description": record["description"],
        "init": [_script(s, f"{where} create.init") for s in inits],
        "start": record.get("start") if isinstance(record.get("start"), str) else None,
        "example": _script(ev["example"], f"{where} evaluation.example") if ev.get("example") is not None else None,
    }
    if "match" in ev:
        m = ev["match"]
        if isinstance(m, str):
            m = {"answer": m, "strip": True}
        if not isinstance(m, dict) or not ("answer" in m or "regex" in m):
            raise TaskFileError(f"os: {where}: evaluation.match must be a string or have 'answer' or 'regex'")
        out["match"] = {k: m[k] for k in ("answer", "regex", "strip") if k in m}
    else:
        chk = ev["check"]
        chk = chk if isinstance(chk, list) else [chk]
        steps: list[dict[str, str] | None] = []
        for i, s in enumerate(chk):
            if s is None:
                if out["example"] is None:
                    raise TaskFileError(f"os: {where}: evaluation.check[{i}] is null but there is no evaluation.example")
                steps.append(None)
            else:
                steps.append(_script(s, f"{where} evaluation.check[{i}]", check=True))
        out["check"] = steps
    return out


def official_tasks(data_dir: Path, split: str) -> Iterator[Task]:
    root = official_root(data_dir)
    if split == "dev":
        files = [("dev", "dev-001-", root / "dev.json")]
    elif split == "test":
        files = []
        for group in STD_GROUPS:
            for path in sorted((root / group).glob("*.json")):
                files.append((group, f"std-00{group}-", path))
    else:
        raise TaskFileError(f"os: unknown split {split!r} (use dev or test)")
    for group, prefix, path in files:
        for i, rec in enumerate(_read_records(path)):
            task_id = f"{prefix}{path.stem}-{i:05d}"
            data = normalise(rec, f"{path} record {i}")
            data.update(group=group, file=str(path.relative_to(root)), index_in_file=i)
            yield Task(env="os", split=split, task_id=task_id, data=data, source="official")


def builtin_path(split: str) -> Path:
    return environments_dir() / "os" / f"{split}.json"


def _file_tasks(path: Path, split: str, *, group: str, prefix: str, source: str) -> Iterator[Task]:
    for i, rec in enumerate(_read_records(path)):
        data = normalise(rec, f"{path} record {i}")
        data.update(group=group, file=path.name, index_in_file=i)
        yield Task(env="os", split=split, task_id=f"{prefix}{i:05d}", data=data, source=source)


def builtin_tasks(split: str) -> Iterator[Task]:
    if split not in ("dev", "test"):
        raise TaskFileError(f"os: unknown split {split!r} (use dev or test)")
    yield from _file_tasks(builtin_path(split), split, group="builtin", prefix=f"{split}-", source="builtin")


def own_file_tasks(path: Path, split: str) -> Iterator[Task]:
    """A task file of the user's own (``--tasks os=PATH``): AgentBench's records, played in either split."""
    yield from _file_tasks(path, split, group="custom", prefix="custom-", source="custom")
