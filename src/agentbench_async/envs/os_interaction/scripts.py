"""The check, init and example scripts that task records reference by file name.

The official records name files under ``scripts/<group>/`` of the AgentBench repository, which are not
part of the data. These are this project's own implementations of their behaviour (spec §5 table),
keyed by the referenced path; built-in tasks use the same names. Each entry is a script object
``{"language": "bash", "code": ...}`` run like any inline script of a record, or, for the five ``check/*.py``
comparisons, ``{"language": "compare", "code": <name>}``, which the engine evaluates itself (:func:`compare`).

The five comparisons are upstream's rules exactly (tested on the verdicts of upstream's own scripts).
Deliberate differences from upstream (listed in the docs): ``check/0.sh``/``checking/0.sh`` parse the tool's output as a number
instead of pasting it into Python source; ``checking/2.sh`` tests all of its cases, not only the first;
``checking/1.sh`` does not loop forever on a symlink cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# --- the comparison checks: pure functions of the answer and the example's output ------------------
# Upstream runs each as ``python3 check/<name>.py ARG1 ARG2`` in the container; what it decides depends on its
# two arguments alone, so the engine evaluates the same rule itself (spec §5 table; no process in the sandbox,
# nothing there can change the verdict). ``args`` are the check's parameters: the answer, then what each earlier
# check step printed (``sys.argv[1:]`` of the script); a missing one fails the check, as the script's
# IndexError would.


def _norm(s: str) -> str:
    return s.replace("\r\n", "\n").replace("\r", "\n").strip()


def _integer_match(args: list[str]) -> bool:
    """``int(argv[1]) == int(argv[2])``; anything ``int()`` refuses (``3.0``, ``220 files``) fails."""
    try:
        return int(args[0]) == int(args[1])
    except (ValueError, IndexError):
        return False


def _string_match(args: list[str]) -> bool:
    return len(args) >= 2 and _norm(args[0]) == _norm(args[1])


# upstream's table, in its order: the first unit the answer ends with is the one taken ("4KB" ends with "B", so
# int("4K") is tried and fails, as upstream's script raises)
_SIZE_UNITS = {"B": 1, "Byte": 1, "K": 1024, "KB": 1024, "M": 1024**2, "MB": 1024**2, "G": 1024**3, "GB": 1024**3,
               "T": 1024**4, "TB": 1024**4, "P": 1024**5, "PB": 1024**5}  # fmt: skip


def _size(s: str) -> int:
    """Upstream's ``analysis_size``: strip, cut the first matching unit, ``int()`` of the rest (``4.0K``, ``735MB``
    and ``1.5G`` raise; ``+220``, ``1_000``, `` 4 K`` parse, as ``int()`` takes them)."""
    s = s.strip()
    for unit, factor in _SIZE_UNITS.items():
        if s.endswith(unit):
            return int(s[: -len(unit)]) * factor
    return int(s)


def _size_match(args: list[str]) -> bool:
    """``check/size-match.py``: both sizes in bytes equal; anything its ``int()`` refuses fails the check."""
    try:
        return _size(args[0]) == _size(args[1])
    except (ValueError, IndexError):
        return False


def _containing(args: list[str]) -> bool:
    return len(args) >= 2 and _norm(args[1]) in _norm(args[0])


def _in(args: list[str]) -> bool:
    """``check/in.py``: the answer, newlines normalised and stripped, occurs in the output (so an empty answer
    passes, as upstream's does)."""
    return len(args) >= 2 and _norm(args[0]) in _norm(args[1])


_COMPARISONS: dict[str, Callable[[list[str]], bool]] = {
    "integer-match": _integer_match,
    "string-match": _string_match,
    "size-match": _size_match,
    "containing": _containing,
    "in": _in,
}


def compare(name: str, args: list[str]) -> bool:
    """The verdict of the comparison check ``name`` (integer-match, string-match, size-match, containing, in) on ``args``."""
    return _COMPARISONS[name](args)


# --- the `calc` tasks -----------------------------------------------------------------------------
_CALC_DEV = [
    "1 + 2", "7 - 10", "3 * 4", "9 / 4", "2 * (9 / 3)", "(1 + 2) * 3", "10 / 3", "-5 + 2 * 3",
    "((2 + 3) * (4 - 1)) / 5", "100 - 3 * (2 + 8)", "1.5 * 4", "7 / 7 + 0.25", "2 * 1", "(8 - 2) / (1 + 2)",
]  # fmt: skip
_CALC_STD = _CALC_DEV + [
    "6 * (9 / 3) + 7", "0.1 + 0.2", "1000 * 1000", "(3 - 8) * (2 - 9)", "5 / 8", "12 * (3 + (4 - 1) * 2)",
    "-(4 + 4)", "2.5 * 2.5 - 1", "99 / 3 / 11", "(1 + 1) * (1 + 1) * (1 + 1)", "123 - 456 + 789", "3.75 / 1.5",
    "(10 - 4) * (10 + 4) / 7", "42", "1 / 3 + 1 / 3 + 1 / 3", "((((1 + 2))))",
]  # fmt: skip


def _calc_check(expressions: list[str]) -> str:
    """Every expression through the episode's ``calc``, then one ``python3`` (the check's, from the image) judging all
    the answers: an answer passes when ``float()`` of it, stripped, is within 1e-5 of the expression's value rounded to
    6 decimals. (One process for all; a process an expression cost ~12 ms of CPU each, ~0.35 s a check.)"""
    lines = "\n".join(expressions)
    return f"""\
set --
while IFS= read -r expr; do
  actual=$(calc "$expr" 2>/dev/null)
  set -- "$@" "$expr" "$actual"
done <<'EXPRESSIONS'
{lines}
EXPRESSIONS
python3 - "$@" <<'PY'
import ast, operator, sys
OPS = {{ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
       ast.USub: operator.neg, ast.UAdd: operator.pos}}
def ev(n):
    if isinstance(n, ast.Expression): return ev(n.body)
    if isinstance(n, ast.Constant): return n.value
    if isinstance(n, ast.BinOp): return OPS[type(n.op)](ev(n.left), ev(n.right))
    if isinstance(n, ast.UnaryOp): return OPS[type(n.op)](ev(n.operand))
    raise ValueError(n)
def passes(expr, answer):
    expected = float("%.6f" % ev(ast.parse(expr, mode="eval")))
    try:
        actual = float(answer.strip())
    except ValueError:
        return False
    return abs(actual - expected) < 1e-5
pairs = list(zip(sys.argv[1::2], sys.argv[2::2]))
sys.exit(0 if len(pairs) == {len(expressions)} and all(passes(e, a) for e, a in pairs) else 1)
PY
"""


_CALC_EXAMPLE = """\
cat > /usr/local/bin/calc <<'PY'
#!/usr/bin/env python3
import ast, operator, sys
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
       ast.USub: operator.neg, ast.UAdd: operator.pos}
def ev(n):
    if isinstance(n, ast.Expression): return ev(n.body)
    if isinstance(n, ast.Constant): return n.value
    if isinstance(n, ast.BinOp): return OPS[type(n.op)](ev(n.left), ev(n.right))
    if isinstance(n, ast.UnaryOp): return OPS[type(n.op)](ev(n.operand))
    raise SystemExit("calc: unsupported expression")
print("%.6f" % ev(ast.parse(" ".join(sys.argv[1:]), mode="eval")))
PY
chmod +x /usr/local/bin/calc
"""

# --- the `count` task: files (and symlinks to files) under a directory, recursively, hidden entries
# skipped (a shell glob), symlinked directories followed (each directory once) ----------------------
_COUNT_DIRS = ["/usr/local/bin", "/root", "/bin", "/lib", "/dev", "/usr/include"]
_COUNT_REFERENCE = """\
import os, sys
def count(d, seen):
    try:
        key = os.stat(d)
    except OSError:
        return 0
    if (key.st_dev, key.st_ino) in seen:
        return 0
    seen.add((key.st_dev, key.st_ino))
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return 0
    n = 0
    for name in names:
        if name.startswith("."):
            continue
        p = os.path.join(d, name)
        if os.path.isfile(p):
            n += 1
        elif os.path.isdir(p):
            n += count(p, seen)
    return n
"""
# both sides run with the same file descriptors (stdin /dev/null, stdout a pipe, stderr /dev/null):
# /dev/stderr and /dev/fd/* are counted through their targets
_COUNT_CHECK = f"""\
for dir in {" ".join(_COUNT_DIRS)}; do
  expected=$(python3 -c '{_COUNT_REFERENCE}
import sys
print(count(sys.argv[1], set()))' "$dir" 2>/dev/null)
  actual=$(count "$dir" 2>/dev/null)
  [ "$actual" = "$expected" ] || exit 1
done
exit 0
"""
_COUNT_EXAMPLE = f"""\
cat > /usr/local/bin/count <<'PY'
#!/usr/bin/env python3
{_COUNT_REFERENCE}
import sys
print(count(sys.argv[1], set()))
PY
chmod +x /usr/local/bin/count
"""

# --- the `date-format` task -------------------------------------------------------------------------
_DATE_CASES = [("2023-5-1", "%Y-%m"), ("2023-5-1", "%Y/%m/%d"), ("1999-12-31", "%d.%m.%Y"),
               ("2024-2-29", "%A %B %d"), ("2000-01-01", "%j"), ("2021-7-4", "%y%m%d")]  # fmt: skip
_DATE_CHECK = "\n".join(
    f"[ \"$(date-format '{d}' '{f}' 2>/dev/null)\" = \"$(date -d '{d}' +'{f}')\" ] || exit 1" for d, f in _DATE_CASES
) + "\nexit 0\n"
_DATE_EXAMPLE = """\
cat > /usr/local/bin/date-format <<'SH'
#!/bin/bash
date -d "$1" +"$2"
SH
chmod +x /usr/local/bin/date-format
"""

# --- init scripts -----------------------------------------------------------------------------------
_STOCK_LOG = """\
names=(Alice Bob)
actions=(Purchase Sell)
for ((i = 0; i <= 400; i++)); do
  echo "${names[RANDOM % 2]} | ${actions[RANDOM % 2]} | $((RANDOM % 100)) | $((RANDOM % 1000))" >> /usr/stock.log
done
"""
_NESTED_FOLDERS = """\
path=.
for i in $(seq 1 10); do
  path="$path/folder$i"
  mkdir -p "$path"
  : > "$path/echo-love"
  if [ "$i" -eq 5 ]; then
    echo 'echo "I love myself."' > "$path/echo-love"
    chmod +x "$path/echo-love"
  fi
done
"""
_GEN_WORDS = """\
vocab=(apple banana cherry delta echo foxtrot grape hotel india juliet)
out=""
for ((i = 0; i < 100; i++)); do
  word=${vocab[RANDOM % 10]}
  if [ $i -gt 0 ]; then out+=$(printf '%*s' $((RANDOM % 4 + 1)) ''); fi
  out+=$word
done
printf '%s' "$out" > /usr/words.txt
"""
_INSTALL_NETTOOLS = "apt-get update && apt-get install -y net-tools iproute2 lsof\n"


def _compare(name: str) -> dict[str, Any]:
    """A comparison check, evaluated by the engine (see :func:`compare`); only a check step may name it."""
    return {"language": "compare", "code": name}


def _sh(code: str) -> dict[str, Any]:
    return {"language": "bash", "code": code}


SCRIPT_FILES: dict[str, dict[str, Any]] = {
    "check/integer-match.py": _compare("integer-match"),
    "check/string-match.py": _compare("string-match"),
    "check/size-match.py": _compare("size-match"),
    "check/containing.py": _compare("containing"),
    "check/in.py": _compare("in"),
    "check/0.sh": _sh(_calc_check(_CALC_DEV)),
    "checking/0.sh": _sh(_calc_check(_CALC_STD)),
    "check/1.sh": _sh(_COUNT_CHECK),
    "checking/1.sh": _sh(_COUNT_CHECK),
    "checking/2.sh": _sh(_DATE_CHECK),
    "example/0.sh": _sh(_CALC_EXAMPLE),
    "example/1.sh": _sh(_COUNT_EXAMPLE),
    "example/2.sh": _sh(_DATE_EXAMPLE),
    "init/stock-log.sh": _sh(_STOCK_LOG),
    "init/nested_folders.sh": _sh(_NESTED_FOLDERS),
    "init/gen_words.sh": _sh(_GEN_WORDS),
    "init/install_nettools.sh": _sh(_INSTALL_NETTOOLS),
    "init/1.sh": _sh(""),
}


def script_file(path: str) -> dict[str, Any] | None:
    """The script a record names with ``{"file": path}``, or ``None`` if this project has no such file."""
    return SCRIPT_FILES.get(path.strip().lstrip("./"))
