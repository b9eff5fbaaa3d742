"""AgentBench's own prompt wording, read out of the upstream source files ``agentbench data pull`` fetches.

AgentBench v0.2 keeps the prompts of alfworld, webshop, card_game and mind2web in Python source, not in
``data/``. The project never contains that wording: ``agentbench data pull`` downloads the files (pinned
commits, sha256-checked, see ``data_manifest.json``) into ``<data-dir>/upstream-prompts/``, laid out as

    upstream-prompts/v0.2/<path in THUDM/AgentBench at 41e6807>   e.g. src/server/tasks/webshop/__init__.py
    upstream-prompts/fc/<path in THUDM/AgentBench at 578c5e9>     e.g. configs/tasks/alfworld.yaml (AgentBench FC)

and an environment run with ``--data-dir`` reads its strings from there. Nothing is imported or executed:
the file is parsed with ``ast`` and only literal values (strings, numbers, lists, dicts, ... accepted by
``ast.literal_eval``) are taken out of it. Use::

    source = upstream_source(data_dir, V02, "src/server/tasks/webshop/__init__.py", env="webshop")
    rules = source.literal("prompt")                                # module-level ``prompt = \"\"\"...\"\"\"``
    text = source.returned("ALFWorld.get_task_instruction")        # the literal a function returns
    shown = source.call_arguments("WebShop.start_sample", "inject")  # ``session.inject({...})`` arguments
    skills = source.literal("self.skill_type", within="Agent.__init__")  # an assignment inside a method

``upstream_config(data_dir, FC, "alfworld", env="alfworld")`` reads a task config (YAML, parsed with
``yaml.safe_load``); ``fc_tools(data_dir, "webshop", ("search_action", "click_action"), env="webshop")`` its
tool definitions. A missing file is a ``TaskFileError`` of one line naming it and the fix (``agentbench
data pull``); a file that no longer holds what is asked for (another commit) is one line naming the file and
the name looked up.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..errors import TaskFileError
from ..deviation import Deviation

UPSTREAM_DIR = "upstream-prompts"
V02 = "v0.2"  # THUDM/AgentBench 41e6807349f741e06428fae3e9e4d334e7002362 (the ICLR-2024 numbers)
FC = "fc"  # THUDM/AgentBench 578c5e9f706fc2dd96188ca6c8cf9095ca0c6528 (AgentBench FC, function calling)
_NOT_LITERAL = object()


def upstream_path(data_dir: Path, version: str, relative: str) -> Path:
    """Where ``agentbench data pull`` puts upstream's ``relative`` file of ``version`` (``V02`` or ``FC``)."""
    return Path(data_dir) / UPSTREAM_DIR / version / relative


@dataclass(frozen=True)
class UpstreamSource:
    """One parsed upstream Python file. Lookups return copies of literal values; nothing is executed."""

    path: Path
    tree: ast.Module = field(repr=False)

    def error(self, what: str) -> TaskFileError:
        """A one-line TaskFileError naming this file and what it lacks (e.g. ``"instruction is not a string"``)."""
        return TaskFileError(f"{self.path}: {what} (not the file of the pinned commit? run `agentbench data pull` again)")

    def _scope(self, within: str | None) -> list[ast.stmt]:
        return self.tree.body if within is None else list(self.function(within).body)

    def function(self, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
        """The definition of a module-level function (``"name"``) or a method (``"Class.name"``)."""
        owner, _, name = qualname.rpartition(".")
        body: list[ast.stmt] = self.tree.body
        if owner:
            classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == owner]
            if not classes:
                raise self.error(f"no class {owner!r}")
            body = classes[0].body
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node
        raise self.error(f"no function {qualname!r}")

    def literal(self, name: str, *, within: str | None = None) -> Any:
        """The literal assigned to ``name`` (``x = ...``, ``x: str = ...``, or ``self.x = ...`` when ``name``
        is ``"self.x"``) at module level, or in the function ``within``; the last assignment wins."""
        found: Any = _NOT_LITERAL
        for node in ast.walk(ast.Module(body=self._scope(within), type_ignores=[])):
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            if any(ast.unparse(t) == name for t in targets):
                found = _literal(value)
                if found is _NOT_LITERAL:
                    raise self.error(f"{name!r} is not assigned a literal value")
        if found is _NOT_LITERAL:
            raise self.error(f"no assignment to {name!r}" + (f" in {within}" if within else ""))
        return found

    def returned(self, function: str) -> Any:
        """The literal the function's first ``return <literal>`` hands back."""
        for node in ast.walk(self.function(function)):
            if isinstance(node, ast.Return) and node.value is not None:
                value = _literal(node.value)
                if value is not _NOT_LITERAL:
                    return value
        raise self.error(f"{function} returns no literal value")

    def call_arguments(self, function: str, callee: str) -> list[Any]:
        """The first argument of every call to ``callee`` (a name or the attribute name of ``x.callee``) inside
        ``function``, in source order: its literal value, or ``None`` where the argument is computed. A dict
        argument keeps its literal entries and maps computed values to ``None``."""
        calls = [n for n in ast.walk(self.function(function)) if isinstance(n, ast.Call) and _callee(n) == callee and n.args]
        calls.sort(key=lambda n: (n.lineno, n.col_offset))
        out: list[Any] = []
        for call in calls:
            arg = call.args[0]
            value = _literal(arg)
            if value is _NOT_LITERAL and isinstance(arg, ast.Dict):
                value = {_literal(k): (None if (v := _literal(d)) is _NOT_LITERAL else v) for k, d in zip(arg.keys, arg.values) if k is not None}
            out.append(None if value is _NOT_LITERAL else value)
        if not out:
            raise self.error(f"{function} makes no call to {callee!r}")
        return out

    def keyword_arguments(self, function: str, callee: str, keyword: str) -> list[Any]:
        """The ``keyword=`` argument of every call to ``callee`` inside ``function``, in source order: its literal
        value, an f-string as a ``str.format`` template of the names it uses (``f'No function {name}'`` ->
        ``'No function {name}'``), or ``None`` where it is computed otherwise (FC's
        ``ChatCompletionUserMessageParam(role='user', content='...')``)."""
        calls = [n for n in ast.walk(self.function(function)) if isinstance(n, ast.Call) and _callee(n) == callee]
        calls.sort(key=lambda n: (n.lineno, n.col_offset))
        out = [_template(k.value) for c in calls for k in c.keywords if k.arg == keyword]
        if not out:
            raise self.error(f"{function} makes no call to {callee!r} with {keyword}=")
        return out

    def assigned_texts(self, function: str, name: str) -> list[str]:
        """The literal texts assigned to ``name`` inside ``function`` (``x = "..."``), in source order; assignments of
        computed values are passed over (FC's webshop: ``observation = "No executable tool calls found! ..."``)."""
        found = [(n.lineno, v) for n in ast.walk(self.function(function)) if isinstance(n, ast.Assign)
                 and any(ast.unparse(t) == name for t in n.targets) and isinstance(v := _literal(n.value), str)]  # fmt: skip
        if not found:
            raise self.error(f"{function} assigns no text to {name!r}")
        return [v for _, v in sorted(found)]

    def added_prefixes(self, function: str, target: str) -> list[str]:
        """For each ``target += "text" + ...`` or ``target = "text" + ...`` inside ``function`` (in source order), the
        literal text it starts with (FC's db task builds its question so: ``user_prompt += "Question: " + …``)."""
        found = []
        for node in ast.walk(self.function(function)):
            added = isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and ast.unparse(node.target) == target
            if added or isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp) and [ast.unparse(t) for t in node.targets] == [target]:
                left = node.value
                while isinstance(left, ast.BinOp):
                    left = left.left
                value = _literal(left)
                if not isinstance(value, str):
                    raise self.error(f"{function}: {target} += does not start with a literal text")
                found.append((node.lineno, node.col_offset, value))
        if not found:
            raise self.error(f"{function} adds nothing to {target!r}")
        return [text for *_, text in sorted(found)]

    def rendered(self, method: str, *, branch: int = -1, **arguments: str) -> Any:
        """What ``Class.method`` returns for string ``arguments``, evaluated from its source without running it: string
        literals, f-strings, lists/dicts/tuples of them, ``+`` of strings, the method's parameters, ``self.other()``
        (another method of the class, no arguments) and ``"sep".join(param)`` (the parameter's value itself). A method
        with several ``return`` statements (an ``if``): ``branch`` picks one, in source order. Anything else is a
        TaskFileError naming the file and the method (the file of another commit)."""
        owner = method.rpartition(".")[0]
        returns = [n for n in ast.walk(self.function(method)) if isinstance(n, ast.Return) and n.value is not None]
        returns.sort(key=lambda n: (n.lineno, n.col_offset))
        if not returns:
            raise self.error(f"{method} returns nothing")
        return self._evaluate(returns[branch].value, owner, arguments, method)

    def _evaluate(self, node: ast.AST, owner: str, arguments: dict[str, str], where: str) -> Any:
        def ev(n: ast.AST) -> Any:
            return self._evaluate(n, owner, arguments, where)

        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                inner = value.value if isinstance(value, ast.FormattedValue) else value
                if isinstance(value, ast.FormattedValue) and (value.conversion != -1 or value.format_spec is not None):
                    break
                parts.append(ev(inner))
            else:
                return "".join(parts)
        elif isinstance(node, ast.Name) and node.id in arguments:
            return arguments[node.id]
        elif isinstance(node, ast.List | ast.Tuple):
            return [ev(e) for e in node.elts]
        elif isinstance(node, ast.Dict) and None not in node.keys:
            return {ev(k): ev(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return ev(node.left) + ev(node.right)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args and not node.keywords \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self":  # fmt: skip
            return self.rendered(f"{owner}.{node.func.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" \
                and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id in arguments:  # fmt: skip
            return arguments[node.args[0].id]
        raise self.error(f"{where}: cannot read {ast.unparse(node)[:80]!r} as text")


def fc_tools(data_dir: Path, task_file: str, names: tuple[str, ...], *, env: str) -> list[dict[str, Any]]:
    """AgentBench FC's tool definitions for a task (``configs/tasks/<task_file>.yaml``: ``default.parameters.tools``),
    as OpenAI-style ``{"type": "function", "function": {...}}`` dicts, checked to define exactly ``names`` in order."""
    config = upstream_config(data_dir, FC, task_file, env=env)
    path = upstream_path(data_dir, FC, f"configs/tasks/{task_file}.yaml")
    tools = ((config.get("default") or {}).get("parameters") or {}).get("tools")
    found = [t.get("function", {}).get("name") if isinstance(t, dict) and isinstance(t.get("function"), dict) else None
             for t in tools] if isinstance(tools, list) else []  # fmt: skip
    if tuple(found) != names or not all(isinstance(t, dict) and t.get("type") == "function" for t in tools or []):
        raise TaskFileError(f"{path}: default.parameters.tools should define the functions {', '.join(names)} (found {found or 'none'})")
    return tools  # parsed afresh on every call: the caller may keep it


def wording_deviations(env: str, data_dir: object, action_mode: str, *, text: str, tools: str, upstream: str,
                       fc_text: bool = False) -> list[Deviation]:  # fmt: skip
    """The named differences in wording (``settings.deviations``) of an environment whose text-mode prompt is v0.2's and
    whose tool definitions are AgentBench FC's when read from ``--data-dir``: ``<env>.prompts`` (text mode without
    it), ``<env>.tools_prompt`` (tools mode: FC's system text is in its task code; ``fc_text``: ``data pull`` fetches
    that code and the environment reads it, so only without ``--data-dir``) and ``<env>.tools`` (tools mode without
    it). ``text``/``tools`` say what the project shows instead, ``upstream`` what v0.2 shows."""
    mine = (env,)
    if action_mode != "tools":
        return [] if data_dir else [Deviation(f"{env}.prompts", text, f"{upstream}, read from --data-dir", "prompt wording differs", envs=mine)]
    out = []
    if not (fc_text and data_dir):
        fc = "AgentBench FC's, read from --data-dir" if fc_text else "AgentBench FC's (in its task code, not fetched by data pull)"
        out.append(Deviation(f"{env}.tools_prompt", "the project's own system text", fc, "prompt wording differs", envs=mine))
    if not data_dir:
        out.append(Deviation(f"{env}.tools", tools, f"AgentBench FC's, read from configs/tasks/{env}.yaml with --data-dir",
                             "tool wording differs", envs=mine))  # fmt: skip
    return out


def tool_replies_deviation(env: str, ours: str) -> Deviation:
    """``<env>.tool_replies``: in tools mode the engine answers every tool call of a message (``ours`` says with what),
    where AgentBench FC leaves the calls it does not run unanswered, a conversation OpenAI's API refuses."""
    return Deviation(f"{env}.tool_replies", f"every tool call answered: {ours}", "AgentBench FC leaves them unanswered (a "
                     "conversation OpenAI's API refuses)", "the model sees a notice FC does not send", envs=(env,))  # fmt: skip


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _template(node: ast.AST) -> Any:
    """A literal's value; an f-string of plain names as a format template; else None."""
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                if not isinstance(value.value, ast.Name) or value.conversion != -1 or value.format_spec is not None:
                    return None
                parts.append("{" + value.value.id + "}")
            else:
                parts.append(str(_literal(value)).replace("{", "{{").replace("}", "}}"))
        return "".join(parts)
    value = _literal(node)
    return None if value is _NOT_LITERAL else value


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


def _read(path: Path, data_dir: Path, env: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFileError(f"{env}: {path} not found (AgentBench's prompts are read from it); "
                            f"run `agentbench data pull --dest {data_dir}`") from None
    except OSError as exc:
        raise TaskFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise TaskFileError(f"{path}: not UTF-8 text") from None


@lru_cache(maxsize=32)
def _parse(path: Path, text: str) -> ast.Module:
    try:
        with warnings.catch_warnings():  # upstream's own invalid escapes ('\['): not the user's concern
            warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
            return ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise TaskFileError(f"{path}: not Python source this reader can parse ({exc.msg} at line {exc.lineno})") from None


def upstream_source(data_dir: Path, version: str, relative: str, *, env: str) -> UpstreamSource:
    """The parsed upstream file ``relative`` (a path in the AgentBench repository) of ``version`` under
    ``data_dir``; a missing file fails with one line naming it and ``agentbench data pull``."""
    path = upstream_path(data_dir, version, relative)
    return UpstreamSource(path=path, tree=_parse(path, _read(path, Path(data_dir), env)))


def upstream_config(data_dir: Path, version: str, task_file: str, *, env: str) -> dict[str, Any]:
    """An upstream task config, ``configs/tasks/<task_file>.yaml`` of ``version``, as parsed YAML."""
    path = upstream_path(data_dir, version, f"configs/tasks/{task_file}.yaml")
    try:
        data = yaml.safe_load(_read(path, Path(data_dir), env))
    except yaml.YAMLError as exc:
        raise TaskFileError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise TaskFileError(f"{path}: not a task config (a YAML mapping of task names)")
    return data


__all__ = ["FC", "UPSTREAM_DIR", "V02", "UpstreamSource", "fc_tools", "upstream_config", "upstream_path", "upstream_source",
           "wording_deviations"]
