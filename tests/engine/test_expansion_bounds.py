"""Issue 44 (and issue 43 item 4): inputs bounded by what they expand to, each ending in one short line.

A config of a few hundred bytes whose aliases name aliases (9 levels x 10: a billion values) passed both documented
bounds (4 MiB read, 64 levels) and grew until killed, wherever it stood: ``envs:``, a model's ``extra_body``, an
environment's option. Task files of the user's own were read without any bound (200,000 nested lists: a RecursionError
traceback; ``/dev/zero``: memory until killed). ``new-env --out`` under /proc or /sys, or with a 300-character name,
was a traceback. Each now ends at once with one ``error:`` line under 1 KB, exit 2, and memory stays small."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from agentbench_async.bounds import MAX_CONFIG_NODES, MAX_TASK_FILE_BYTES, load_yaml
from agentbench_async.cli import main

LEVELS = "abcdefghi"


def _bomb(indent: str) -> str:
    """Nine anchored lists, each of ten aliases of the one before: 10^9 values once expanded, ~450 bytes."""
    lines = [f'{indent}a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{indent}{n}: &{n} [{','.join(['*' + p] * 10)}]" for p, n in zip(LEVELS, LEVELS[1:])]
    return "\n".join(lines) + "\n"


BOMBS = {
    "envs": "models: [{name: m, base_url: 'http://127.0.0.1:9/v1'}]\nenvs:\n"
            + "".join(f"  - {line.split(': ', 1)[1]}\n" for line in _bomb("").splitlines()),
    "extra_body": "models:\n  - name: m\n    base_url: http://127.0.0.1:9/v1\n    extra_body:\n" + _bomb("      "),
    "env option": "models: [{name: m, base_url: 'http://127.0.0.1:9/v1'}]\nenvs: [echo]\nenv_options:\n  echo:\n" + _bomb("    "),
}  # fmt: skip


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert len(lines[0].encode()) < 1024, len(lines[0])
    return lines[0]


@pytest.mark.parametrize("place", sorted(BOMBS))
def test_an_alias_bomb_is_one_line_at_once(capsys, tmp_path, place):
    path = tmp_path / "run.yaml"
    path.write_text(BOMBS[place], encoding="utf-8")
    assert path.stat().st_size < 600
    tracemalloc.start()
    started = time.process_time()
    try:
        code = main(["run", "--config", str(path), "--out", str(tmp_path / "r.duckdb")])
        spent = time.process_time() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 2
    line = _one_line(capsys)
    assert line.startswith(f"error: {path}: line ") and f"more than {MAX_CONFIG_NODES:,} values" in line, line
    assert spent < 2 and peak < 20 << 20, (spent, peak)
    assert not (tmp_path / "r.duckdb").exists()


def test_aliases_a_config_uses_still_load():
    """Anchors and merge keys as people write them (shared model settings) are counted, not refused."""
    text = ("defaults: &d {temperature: 0, max_tokens: 256, extra_body: {top_p: 1}}\n"
            "models:\n  - {<<: *d, name: a}\n  - {<<: *d, name: b, max_tokens: 128}\n")  # fmt: skip
    raw = load_yaml(text, "run.yaml")
    assert [m["max_tokens"] for m in raw["models"]] == [256, 128] and raw["models"][1]["extra_body"] == {"top_p": 1}


def test_a_message_echoing_a_huge_value_is_cut(capsys, tmp_path):
    """A value within the bounds but echoed by its error (a 100 KB string where environment names go) is cut in the
    middle: the line keeps the file and field at its start and the fix at its end."""
    path = tmp_path / "run.yaml"
    path.write_text("models: [{name: m, base_url: 'http://127.0.0.1:9/v1'}]\nenvs: [[" + "x" * 100_000 + "]]\n", encoding="utf-8")
    assert main(["run", "--config", str(path), "--out", str(tmp_path / "r.duckdb")]) == 2
    line = _one_line(capsys)
    assert "envs" in line and " … " in line


def _deep(path: Path) -> Path:
    path.write_text("[" * 200_000 + "]" * 200_000 + "\n", encoding="utf-8")
    return path


TASK_FILES = {"os": "deep.json", "kg": "deep.json", "db": "deep.jsonl", "ltp": "deep.jsonl"}


@pytest.mark.parametrize("env", sorted(TASK_FILES))
@pytest.mark.parametrize("kind", ["200k-deep", "dev-zero"])
def test_a_task_file_of_your_own_is_read_within_bounds(capsys, tmp_path, env, kind):
    path = _deep(tmp_path / TASK_FILES[env]) if kind == "200k-deep" else Path("/dev/zero")
    tracemalloc.start()
    try:
        code = main(["run", "--no-progress", "--env", env, "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                     "--tasks", f"{env}={path}", "--out", str(tmp_path / "r.duckdb")])  # fmt: skip
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 2
    line = _one_line(capsys)
    assert str(path) in line
    if kind == "dev-zero":
        assert f"larger than {MAX_TASK_FILE_BYTES >> 20} MiB, too big for a task file" in line, line
    else:
        assert "nests lists/objects deeper than" in line, line
    assert peak < MAX_TASK_FILE_BYTES + (16 << 20), peak  # at most the bound read, once
    assert not (tmp_path / "r.duckdb").exists()


@pytest.mark.parametrize("out", ["/proc/x", "/sys/x", "{tmp}/" + "a" * 300], ids=["proc", "sys", "300-chars"])
def test_new_env_out_where_nothing_can_be_written_is_one_line(capsys, tmp_path, out):
    out = out.replace("{tmp}", str(tmp_path))
    assert main(["new-env", "my_game", "--out", out]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"error: new-env: --out {out[:40]}") and "cannot write there (" in line and "give a new folder" in line, line
