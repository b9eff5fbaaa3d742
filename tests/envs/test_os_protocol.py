"""os: loaders, parser, observations, check scripts and the built-in suite generator (no sandbox needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from agentbench_async.envs import make_env
from agentbench_async.envs.os_interaction.protocol import observation_text, parse_text, parse_tools
from agentbench_async.envs.os_interaction.records import normalise
from agentbench_async.envs.os_interaction.scripts import SCRIPT_FILES
from agentbench_async.errors import TaskFileError
from agentbench_async.resources import environments_dir
from agentbench_async.types import ModelReply, ToolCall
from support import load_generator


def test_official_counts_and_ids(official_data_dir: Path) -> None:
    env = make_env("os", data_dir=official_data_dir)
    dev, test = list(env.tasks("dev")), list(env.tasks("test"))
    assert len(dev) == 26 and len(test) == 144
    ids = {t.task_id for t in dev + test}
    assert {"dev-001-dev-00000", "std-004-Q30-00003", "std-001-stock-00000", "std-007-bootstrap-00087"} <= ids
    kinds = Counter(("match" if "match" in t.data else "check", t.split) for t in dev + test)
    assert kinds == {("check", "dev"): 21, ("match", "dev"): 5, ("check", "test"): 135, ("match", "test"): 9}
    # every referenced script file resolved to this project's own implementation
    q47 = env.get_task("test", "std-004-Q47-00000")
    assert q47.data["start"] == "mkdir /home/user2 && cd /home/user2" and len(q47.data["check"]) == 3


def test_builtin_suites_regenerate_identically() -> None:
    module = load_generator("os")
    for split in ("dev", "test"):
        assert (environments_dir() / "os" / f"{split}.json").read_text(encoding="utf-8") == module.render(split)
    env = make_env("os")
    assert env.count("dev") >= 20 and env.count("test") >= 50
    assert env.get_task("dev", "dev-00000").source == "builtin"
    records = json.loads((environments_dir() / "os" / "test.json").read_text(encoding="utf-8"))
    assert len({r["description"] for r in records}) >= 50  # varied, not one task repeated
    assert all("example" in r["evaluation"] for r in records)  # each has a reference solution


def test_bad_records_name_the_problem() -> None:
    with pytest.raises(TaskFileError, match="unknown script file 'check/nope.py'"):
        normalise({"description": "x", "evaluation": {"check": [{"file": "check/nope.py"}]}}, "f.json record 3")
    with pytest.raises(TaskFileError, match="f.json record 1: evaluation.check\\[0\\] is null"):
        normalise({"description": "x", "evaluation": {"check": [None]}}, "f.json record 1")
    with pytest.raises(TaskFileError, match="language 'c'"):
        normalise({"description": "x", "create": {"init": {"language": "c", "code": "int main(){}"}}, "evaluation": {"match": "1"}}, "r")
    # a list-valued `create` (a data bug upstream) means: default image, no init
    assert normalise({"description": "x", "create": [1], "evaluation": {"match": "1"}}, "r")["init"] == []


def test_parser_follows_agentbench() -> None:
    reply = "Think: a\nAct: bash\n```bash\nls\n```\n```sh\nnope\n```\n```bash\npwd\n```"
    action = parse_text(reply)
    assert action.kind == "bash" and action.command == "ls\n\npwd"  # type: ignore[union-attr]
    assert parse_text("Act: bash\n```bash\nls```").command == ""  # type: ignore[union-attr]  # no newline before fence
    # the textually last recognised Act wins; answer takes first '(' to last ')'
    assert parse_text("Act: bash\n```bash\nls\n```\nAct: answer(f(1) )").answer == "f(1) "  # type: ignore[union-attr]
    assert parse_text("Act:\nfinish").kind == "finish"  # type: ignore[union-attr]
    assert parse_text("Act: answer(3)\nAct: answer 4").answer == "3"  # type: ignore[union-attr]
    assert parse_text("no action here").status == "invalid_format"  # type: ignore[union-attr]
    assert parse_text("Act: answer 4").status == "invalid_format"  # type: ignore[union-attr]
    assert parse_text("Act: python").status == "invalid_action"  # type: ignore[union-attr]
    tool = ModelReply(content="", tool_calls=[ToolCall(id="1", name="answer_action", arguments='{"answer": 7}')])
    assert parse_tools(tool).answer == "7"  # type: ignore[union-attr]
    bad = ModelReply(content="", tool_calls=[ToolCall(id="1", name="bash_action", arguments="{not json")])
    assert parse_tools(bad).status == "invalid_format"  # type: ignore[union-attr]
    unknown = ModelReply(content="", tool_calls=[ToolCall(id="1", name="rm_rf", arguments="{}")])
    assert parse_tools(unknown).status == "invalid_action"  # type: ignore[union-attr]


def test_observation_truncation() -> None:
    assert observation_text("") == "The output of the OS is empty."
    assert observation_text("220\n") == "The output of the OS:\n\n220\n"
    long = observation_text("x" * 801)
    assert long.endswith("x" * 10 + "\n[truncated because the output is too long]") and len(long) == 23 + 780 + 43


def _check(name: str, *args: str) -> bool:
    code = SCRIPT_FILES[name]["code"]
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True).returncode == 0


def test_check_scripts_semantics() -> None:
    assert _check("check/integer-match.py", " 220\n", "220\n") and _check("check/integer-match.py", "1_000", "1000")
    assert not _check("check/integer-match.py", "220 files", "220") and not _check("check/integer-match.py", "3.0", "3")
    assert _check("check/string-match.py", "a\r\nb ", "a\nb\n") and not _check("check/string-match.py", "A", "a")
    # size-match with the upstream bug fixed: decimals and two-letter units parse
    assert _check("check/size-match.py", "8.0K", "8.0K\t/home\n".split("\t")[0])
    assert _check("check/size-match.py", "4KB", "4096") and _check("check/size-match.py", "1M", "1024K")
    assert not _check("check/size-match.py", "5G", "5.5G") and not _check("check/size-match.py", "big", "1")
    assert _check("check/containing.py", "the answer is 42", "42") and _check("check/in.py", "42", "x42y")


def test_instructions_carry_upstreams_facts_and_no_extra_hints() -> None:
    from agentbench_async.envs.os_interaction.protocol import first_messages

    text = first_messages("DESC", "text")
    intro = text[0]["content"]
    # AgentBench's facts: a Linux (Ubuntu) machine, think then one of three actions with their templates,
    # long output truncated, no interactive input, one action per turn; then the one-shot, then the task
    for fact in ("Linux (Ubuntu)", "Think:", "Act: bash\n\n```bash", "Act: finish", "Act: answer(", "interactive input",
                 "too long", "one of the three actions"):  # fmt: skip
        assert fact in intro, fact
    assert intro.endswith('\n\nNow, my problem is:\n\ntell me how many files are in the directory "/etc"?')
    assert text[-1]["content"].endswith("My problem is:\n\nDESC") and len(text) == 7
    # no hints upstream does not give: how to filter output, or which action suits which kind of task
    tools_intro = first_messages("DESC", "tools")[0]["content"]
    for extra in ("grep", "head", "wc", "change the system", "requested change"):
        assert extra not in intro and extra not in tools_intro, extra


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("os.concurrency=0", "os: option concurrency='0' must be a positive integer"),
        ("os.concurrency=abc", "os: option concurrency='abc' must be a positive integer"),
        ("os.disk_mb=abc", "os: option disk_mb='abc' must be a positive integer"),
        ("os.memory_mb=-1", "os: option memory_mb='-1' must be an integer >= 16"),
        ("os.command_timeout=nan", "os: option command_timeout='nan' must be a number > 0"),
        ("os.command_timeout=-1", "os: option command_timeout='-1' must be a number > 0"),
        ("os.colour=red", "os: unknown option 'colour' (valid: command_timeout, concurrency, cpu_seconds, disk_mb,"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(tmp_path: Path, option: str, says: str) -> None:
    """One line, exit 2, before a sandbox or a model call (os.concurrency=0 used to hang for 10 minutes)."""
    out = tmp_path / "x.duckdb"
    proc = subprocess.run(
        [sys.executable, "-m", "agentbench_async.cli", "run", "--model", "mock-oracle", "--base-url", "http://127.0.0.1:9/v1",
         "--env", "os", "--env-option", option, "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in proc.stderr, proc.stderr
