"""os: loaders, parser, observations, check scripts and the built-in suite generator (no sandbox needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from agentbench_async.envs import make_env
from agentbench_async.envs.os_interaction.protocol import OWN_PROMPTS, observation_text, parse_text, parse_tools
from agentbench_async.envs.os_interaction.records import normalise
from agentbench_async.envs.os_interaction.scripts import compare
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
    # AgentBench FC answers an unusable reply and the episode goes on (ToolNotice): the JSON error's own text as the
    # call's tool message, its invalid-call notice for another function, its user notice for no call at all
    bad = ModelReply(content="", tool_calls=[ToolCall(id="1", name="bash_action", arguments="{not json")])
    assert parse_tools(bad).message == {"role": "tool", "tool_call_id": "1",  # type: ignore[union-attr]
                                        "content": "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"}
    unknown = ModelReply(content="", tool_calls=[ToolCall(id="1", name="rm_rf", arguments="{}")])
    assert parse_tools(unknown).message["content"] == OWN_PROMPTS.invalid_call  # type: ignore[union-attr]
    assert parse_tools(ModelReply(content="done")).message == {"role": "user", "content": OWN_PROMPTS.no_call}  # type: ignore[union-attr]
    # finish_action commits its thought as the answer (FC's commit); without arguments it has none
    thought = ModelReply(content="", tool_calls=[ToolCall(id="1", name="finish_action", arguments='{"thought": "all set"}')])
    assert (parse_tools(thought).kind, parse_tools(thought).answer) == ("answer", "all set")  # type: ignore[union-attr]
    assert parse_tools(ModelReply(content="", tool_calls=[ToolCall(id="1", name="finish_action", arguments="{}")])).kind == "finish"  # type: ignore[union-attr]


def test_observation_truncation() -> None:
    assert observation_text("") == "The output of the OS is empty."
    assert observation_text("220\n") == "The output of the OS:\n\n220\n"
    long = observation_text("x" * 801)
    assert long.endswith("x" * 10 + "\n[truncated because the output is too long]") and len(long) == 23 + 780 + 43


# The comparison checks as this project ran them inside the sandbox (``python3 -I -S -c CODE ARGS...``) until
# the engine evaluated them itself: the in-engine rules must give the same verdict on every input. (size-match and
# in were the project's own rules then; they are upstream's now, checked against upstream's verdicts below.)
_SANDBOX_SCRIPTS = {
    "integer-match": """
import sys
try:
    ok = int(sys.argv[1]) == int(sys.argv[2])
except Exception:
    ok = False
sys.exit(0 if ok else 1)
""",
    "string-match": """
import sys
def norm(s):
    return s.replace("\\r\\n", "\\n").replace("\\r", "\\n").strip()
sys.exit(0 if norm(sys.argv[1]) == norm(sys.argv[2]) else 1)
""",
    "containing": """
import sys
def norm(s):
    return s.replace("\\r\\n", "\\n").replace("\\r", "\\n").strip()
sys.exit(0 if norm(sys.argv[2]) in norm(sys.argv[1]) else 1)
""",
}
_VALUES = [
    "220", " 220\n", "220\n", "+220", "-0", "0", "1_000", "1000", "3.0", "3", "220 files", "", " ", "\n",
    "\u0663\u0664", "34", "1,000", "8.0K", "8.0K\t/home", "8192", "4KB", "4096", "1M", "1024K", "5G", "5.5G", "5 g",
    "1.5 MiB", "big", "1e3", "a\r\nb ", "a\nb\n", "A", "a", "the answer is 42", "42", "x42y", "\u00a0 42\u2003",
    "0x10", "16", "9" * 5000, "line1\rline2", "line1\nline2",
]


def test_comparison_checks_decide_as_the_scripts_did_in_the_sandbox() -> None:
    """Every pair of a battery of answers (ordinary, Unicode digits and spaces, sizes, a 5,000-digit number) gets
    the verdict the script it replaces gave, run as a check ran it (``python3 -I -S``, the values as argv)."""
    pairs = [[a, b] for a in _VALUES for b in _VALUES] + [["42"], []]
    # each case as ``python3 -I -S -c CODE ARGS`` runs it (exit status 0 = pass; an uncaught exception exits 1),
    # all cases of a script in one interpreter
    runner = (
        "import json, sys\n"
        "code, cases, out = sys.argv[1], json.loads(sys.stdin.read()), []\n"
        "for case in cases:\n"
        "    sys.argv[:] = ['-c', *case]\n"
        "    try:\n"
        "        exec(compile(code, '<string>', 'exec'), {'__name__': '__main__'})\n"
        "        status = 0\n"
        "    except SystemExit as e:\n"
        "        status = e.code or 0\n"
        "    except Exception:\n"
        "        status = 1\n"
        "    out.append(status == 0)\n"
        "print(json.dumps(out))\n"
    )
    for name, code in _SANDBOX_SCRIPTS.items():
        wanted = json.loads(
            subprocess.run([sys.executable, "-I", "-S", "-c", runner, code], input=json.dumps(pairs), capture_output=True, text=True, check=True).stdout
        )
        got = [compare(name, list(p)) for p in pairs]
        differ = [(p, w) for p, g, w in zip(pairs, got, wanted) if g != w]
        assert not differ, f"{name}: {differ[:3]}"
        assert any(wanted) and not all(wanted)  # the battery exercises both verdicts


UPSTREAM_VERDICTS = Path(__file__).resolve().parents[1] / "fixtures" / "os_checks_upstream" / "verdicts.json"


@pytest.mark.parametrize("name", ["integer-match", "string-match", "size-match", "containing", "in"])
def test_comparison_checks_decide_as_upstreams_own_scripts(name: str) -> None:
    """The verdicts of AgentBench v0.2's check/<name>.py (41e6807, fixture README) on every pair of 67 answers:
    the engine's rule agrees on each one."""
    fixture = json.loads(UPSTREAM_VERDICTS.read_text(encoding="utf-8"))
    values = fixture["values"]
    pairs = [[a, b] for a in values for b in values] + [["42"], []]
    wanted = [bit == "1" for bit in fixture["verdicts_" + name]]
    assert len(wanted) == len(pairs) and any(wanted) and not all(wanted)
    differ = [(p, w) for p, w in zip(pairs, wanted) if compare(name, list(p)) != w]
    assert not differ, f"{name}: {len(differ)} pairs differ from upstream, e.g. {differ[:3]}"


def test_size_match_and_in_follow_upstreams_quirks() -> None:
    # upstream's unit table tries "B" first: a two-letter unit is int("735M") and fails; decimals fail int()
    assert not compare("size-match", ["735MB", "735M"]) and not compare("size-match", ["4.0K", "4096"])
    assert not compare("size-match", ["1.5G", "1610612736"])
    assert compare("size-match", ["+220", "220"]) and compare("size-match", ["1_000", "1000"])
    assert compare("size-match", [" 12K \n", "12288"]) and compare("size-match", ["5Byte", "5"])
    # in: newlines normalised and both sides stripped; an empty answer is in every output, as upstream's script has it
    assert compare("in", ["42\r\n", " x42y\n"]) and compare("in", ["", "anything"]) and compare("in", [" \n", "x"])
    assert not compare("in", ["43", "x42y"])


def test_comparison_checks_semantics() -> None:
    assert compare("integer-match", [" 220\n", "220\n"]) and compare("integer-match", ["1_000", "1000"])
    assert not compare("integer-match", ["220 files", "220"]) and not compare("integer-match", ["3.0", "3"])
    assert compare("string-match", ["a\r\nb ", "a\nb\n"]) and not compare("string-match", ["A", "a"])
    assert compare("size-match", ["8K", "8K\t/home\n".split("\t")[0]]) and compare("size-match", ["1M", "1024K"])
    assert not compare("size-match", ["5G", "5.5G"]) and not compare("size-match", ["big", "1"])
    assert compare("containing", ["the answer is 42", "42"]) and compare("in", ["42", "x42y"])


def test_a_hostile_answer_cannot_stall_the_size_comparison() -> None:
    """Whitespace runs that made the sandbox script's regex backtrack quadratically are decided at once."""
    answer = "1" + " " * 200_000 + "!"
    assert not compare("size-match", [answer, "1"]) and not compare("size-match", ["1", answer])


def test_a_comparison_file_is_refused_outside_a_check_step() -> None:
    record = {"description": "d", "create": {"init": {"file": "check/integer-match.py"}}, "evaluation": {"match": "1"}}
    with pytest.raises(TaskFileError, match=r"runs only as a step of evaluation.check"):
        normalise(record, "tasks.json record 0")
    checked = normalise({"description": "d", "evaluation": {"check": [None, {"file": "check/in.py"}], "example": "echo 1"}}, "r")
    assert checked["check"][1] == {"language": "compare", "code": "in"}


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
