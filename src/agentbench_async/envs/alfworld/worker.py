"""A game-hosting process: runs TextWorld/ALFWorld games for the parent's ``GamePool``.

Started as ``python -m agentbench_async.envs.alfworld.worker``. Requests arrive on stdin and answers leave
on the original stdout, one JSON object per line (anything the engine prints goes to stderr)::

    {"id": 1, "op": "open", "game": 7, "path": ".../game.tw-pddl"}   -> feedback, admissible, won, gamefile
    {"id": 2, "op": "step", "game": 7, "command": "go to desk 1"}     -> feedback, admissible, won, done
    {"id": 3, "op": "close", "game": 7}
    {"id": 4, "op": "stats"}                                           -> rss_bytes, live, libraries, opened

Each game is loaded as AgentBench loads it (ALFWorld's ``AlfredTWEnv.init_env``): TextWorld's PDDL
environment with the ``AlfredDemangler(shuffle=False)`` and ``AlfredInfos`` wrappers, requesting ``won``,
``admissible_commands`` and the ``gamefile`` extra.

Memory fix: TextWorld's PDDL environment copies fast-downward's shared library to a temporary file and
loads the copy for every game (its global state *is* the game's planner state) and never unloads it,
so a process grows by ~2 MB per game ever played (AgentBench FC notes its ALFWorld workers leak). Here a
closed game's library has its planner state freed (the library's own ``cleanup``) and goes back to a free
list, and the next game reuses it (loading a problem replaces the library's whole state, which TextWorld
itself relies on at every reset); freed heap goes back to the kernel (``malloc_trim``) when the worker
has no game left or after every 32 closes. Memory follows the number of games live at once, not the
number played. (Unloading a library copy with ``dlclose`` would give back its ~1.6 MB of mapped pages
too, but the next load then crashes the process, so spare copies stay mapped.)

Speed (same texts, same commands, checked by the tests against a plain TextWorld environment):

* TextWorld parses every grammar template with a PEG parser each time it derives a text (the ~700 rules of
  ALFWorld's grammar at every load, and each admissible command's template at every step). The parse of a
  template string never changes, so parses are memoised per process and each use gets a deep copy (the
  derivation writes its context into the symbols);
* ``load`` builds the game's planner state and the first ``reset`` builds the same state again; the first
  reset after a load reuses the one just built;
* building a planner state translates the PDDL problem twice: once as the game's state, once optimised
  for the planner's replanning, which serves only expert plans (``policy_commands``, a missing
  ``walkthrough``) — never requested here. The replanning slot gets the first translation instead (still a
  correct task for the planner, only not pruned), which halves the translation time.
"""

from __future__ import annotations

import copy
import ctypes
import ctypes.util
import functools
import json
import os
import sys
from typing import Any

_TRIM_EVERY = 32  # closes between two malloc_trim calls while games are live
_PARSES_KEPT = 8192  # distinct template strings; ALFWorld's grammar has ~700 rules, a game adds a few


def _translate_once() -> None:
    """Let fast-downward's optimised translation (replanning only) reuse the plain one just made for the
    same domain and problem (TextWorld's planner state asks for both, one after the other)."""
    import fast_downward

    translate = fast_downward.pddl2sas
    if getattr(translate, "once", False):
        return
    last: dict[tuple[str, str], Any] = {}

    def once(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
        if optimize and (domain, problem) in last:
            return last.pop((domain, problem))
        result = translate(domain, problem, verbose=verbose, optimize=optimize)
        last.clear()
        if not optimize:
            last[(domain, problem)] = result
        return result

    once.once = True  # type: ignore[attr-defined]
    fast_downward.pddl2sas = once


def _memoise_template_parses() -> None:
    """Make TextWorld's grammar-template parser remember its results (a deep copy per use)."""
    from textworld.envs.pddl import textgen

    parse = textgen._parse_and_convert
    if getattr(parse, "memoised", False):
        return
    remembered = functools.lru_cache(maxsize=_PARSES_KEPT)(lambda text, rule_name, trace: parse(text, rule_name=rule_name, trace=trace))

    def memoised(text: str, rule_name: str = "symbols", trace: bool = False) -> Any:
        return copy.deepcopy(remembered(text, rule_name, bool(trace)))

    memoised.memoised = True  # type: ignore[attr-defined]
    textgen._parse_and_convert = memoised


class _Host:
    """The live games of this process."""

    def __init__(self) -> None:
        import fast_downward
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs.pddl.pddl import PddlEnv

        from textworld.envs.pddl import logic as pddl_logic

        _memoise_template_parses()
        _translate_once()
        host = self
        build_state = pddl_logic.PddlState

        class _PooledPddlEnv(PddlEnv):  # type: ignore[misc]
            """TextWorld's PDDL environment taking its fast-downward library from the free list, and whose
            first reset reuses the planner state its load built."""

            def __init__(self, infos: Any) -> None:
                textworld.Environment.__init__(self, infos)
                self.downward_lib = host.free_libs.pop() if host.free_libs else fast_downward.load_lib()
                host.libraries = max(host.libraries, len(host.games) + 1)
                self._loaded_state: Any = None

            def load(self, filename_or_data: Any) -> None:
                super().load(filename_or_data)
                self._loaded_state = self._pddl_state

            def reset(self) -> Any:
                fresh, self._loaded_state = self._loaded_state, None
                if fresh is None:
                    return super().reset()
                pddl_logic.PddlState = lambda *args, **kwargs: fresh  # TextWorld's reset builds it by this name
                try:
                    return super().reset()
                finally:
                    pddl_logic.PddlState = build_state

        self._env_class = _PooledPddlEnv
        self._wrappers = (AlfredDemangler, AlfredInfos)
        self._infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        self.games: dict[int, Any] = {}
        self.free_libs: list[Any] = []
        self.libraries = 0
        self.opened = 0
        self._closed_since_trim = 0
        self._trim = _malloc_trim()

    def open(self, game: int, path: str) -> dict[str, Any]:
        if game in self.games:
            raise ValueError(f"game {game} is already open")
        demangler, infos_wrapper = self._wrappers
        env = self._env_class(self._infos)
        env = infos_wrapper(demangler(env, shuffle=False))
        try:
            env.load(path)
            state = env.reset()
        except BaseException:
            self._release(env)
            raise
        self.games[game] = env
        self.opened += 1
        return {
            "feedback": state["feedback"],
            "admissible": list(state["admissible_commands"]),
            "won": bool(state["won"]),
            "gamefile": state.get("extra.gamefile"),
        }

    def step(self, game: int, command: str) -> dict[str, Any]:
        env = self.games[game]
        state, _score, done = env.step(command)
        return {"feedback": state["feedback"], "admissible": list(state["admissible_commands"]), "won": bool(state["won"]), "done": bool(done)}

    def close(self, game: int) -> dict[str, Any]:
        env = self.games.pop(game, None)
        if env is not None:
            self._release(env)
            self._closed_since_trim += 1
            if self._trim is not None and (not self.games or self._closed_since_trim >= _TRIM_EVERY):
                self._trim(0)
                self._closed_since_trim = 0
        return {}

    def _release(self, env: Any) -> None:
        inner = env.unwrapped
        lib = getattr(inner, "downward_lib", None)
        env.close()
        if lib is not None:
            inner.downward_lib = None
            inner._pddl_state = inner._loaded_state = None
            lib.cleanup()  # the planner's state of this game
            self.free_libs.append(lib)

    def stats(self) -> dict[str, Any]:
        with open("/proc/self/statm", encoding="ascii") as handle:
            rss = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        return {"rss_bytes": rss, "live": len(self.games), "libraries": self.libraries, "opened": self.opened}


def _malloc_trim() -> Any:
    """glibc's ``malloc_trim`` (gives freed heap back to the kernel), or None elsewhere (e.g. musl)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def _answer(out: Any, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload).encode("utf-8") + b"\n")
    out.flush()


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the engine's own prints must not mix with the answers
    sys.stdout = sys.stderr
    try:
        host = _Host()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises EnvUnavailableError
        _answer(out, {"id": 0, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    _answer(out, {"id": 0, "ok": True, "result": {"pid": os.getpid()}})
    for line in sys.stdin.buffer:
        request: dict[str, Any] = {}
        try:
            request = json.loads(line)
            op = request["op"]
            if op == "open":
                result = host.open(int(request["game"]), str(request["path"]))
            elif op == "step":
                result = host.step(int(request["game"]), str(request["command"]))
            elif op == "close":
                result = host.close(int(request["game"]))
            elif op == "stats":
                result = host.stats()
            else:
                raise ValueError(f"unknown op {op!r}")
            _answer(out, {"id": request.get("id"), "ok": True, "result": result})
        except Exception as exc:  # noqa: BLE001 - one game's failure is that episode's env_error
            _answer(out, {"id": request.get("id"), "ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]})


if __name__ == "__main__":
    main()
