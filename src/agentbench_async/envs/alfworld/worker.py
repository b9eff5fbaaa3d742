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
* every live game needs its own copy of fast-downward's library, and TextWorld's ``load_lib`` copies the library's
  file (33.8 MB, 97% of it debugging sections the loader never reads) to a temporary file for each one (10 ms of
  CPU and 33.8 MB written to disk for each library a worker loads: as many as its games live at once). The copies
  are made from the library's loadable part only (its program's segments, 1.1 MB, written once per worker into
  memory), so the code and data each game's planner runs are byte for byte the same;
* building a planner state translates the PDDL problem twice: once as the game's state, once optimised
  for the planner's replanning, which serves only expert plans (``policy_commands``, a missing
  ``walkthrough``) — never requested here. The replanning slot gets the first translation instead (still a
  correct task for the planner, only not pruned), which halves the translation time.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import ctypes
import ctypes.util
import functools
import hashlib
import json
import os
import pickle
import struct
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEPT_FOLDER_VARIABLE = "AGENTBENCH_ALFWORLD_KEPT"  # the folder of kept game work the parent gives (unset: none)
# further workers this one forks once its imports are done: "IN,OUT,ERR;IN,OUT,ERR;..." (each one's stdin, answers and
# stderr file descriptors, passed by the parent); unset: none
FORK_FDS_VARIABLE = "AGENTBENCH_ALFWORLD_FORK_FDS"
_TRIM_EVERY = 32  # closes between two malloc_trim calls while games are live
_QUERY_RULE = "conjunctiveQuery"  # the logic parser's rule for the conditions of grammar rules
_PARSES_KEPT = 8192  # distinct template strings; ALFWorld's grammar has ~700 rules, a game adds a few
_KEPT_GAMES = 128  # loaded games' logic and translations kept in a worker's memory (~30 KB each, compressed)
_KEPT_FORMAT = "1"  # what a kept file holds; another value makes every key new


class _Kept:
    """Loaded games' work kept for the next load of the same game (another episode, repeat or model of the run, or a
    later run): the parsed game logic and the planner's translation of its problem, each the pure function of texts
    the game file holds. Kept pickled and compressed — in this process (the last ``_KEPT_GAMES``) and in ``folder``
    (shared by the workers and by later runs; None: this process only); every use unpickles its own copy, so no
    two games share an object. The key covers the texts and the versions of the packages that made the value."""

    def __init__(self, folder: Path | None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        stamp = [_KEPT_FORMAT, sys.version]
        for package in ("textworld", "fast-downward-textworld"):
            try:
                stamp.append(f"{package}={version(package)}")
            except PackageNotFoundError:
                stamp.append(f"{package}=?")
        self._stamp = "\0".join(stamp)
        self._memory: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self._folder = folder
        self.hits = self.misses = 0

    def get(self, kind: str, texts: tuple[str, ...], make: Callable[[], Any]) -> Any:
        key = hashlib.sha256("\0".join((self._stamp, kind, *texts)).encode("utf-8")).hexdigest()
        blob = self._memory.get(key) or self._read(key)
        if blob is not None:
            try:
                value = pickle.loads(zlib.decompress(blob))
            except Exception:  # noqa: BLE001 - a damaged file: made again below
                value = blob = None
            else:
                self.hits += 1
                self._remember(key, blob)
                return value
        self.misses += 1
        value = make()
        blob = zlib.compress(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), 1)
        self._remember(key, blob)
        self._write(key, blob)
        return value

    def _remember(self, key: str, blob: bytes) -> None:
        self._memory[key] = blob
        self._memory.move_to_end(key)
        while len(self._memory) > _KEPT_GAMES:
            self._memory.popitem(last=False)

    def _read(self, key: str) -> bytes | None:
        if self._folder is None:
            return None
        try:
            return (self._folder / key).read_bytes()
        except OSError:
            return None

    def _write(self, key: str, blob: bytes) -> None:
        if self._folder is None:
            return
        part = self._folder / f".{key}.{os.getpid()}"
        try:
            self._folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            part.write_bytes(blob)
            os.replace(part, self._folder / key)
        except OSError:
            self._folder = None  # not writable: this process keeps what it made in memory only
            with contextlib.suppress(OSError):
                part.unlink()


def _keep_translations(kept: _Kept) -> None:
    """fast-downward's translation of a game's problem is kept (``_Kept``), and the optimised translation (replanning
    only) reuses the plain one just made for the same domain and problem (TextWorld's planner state asks for both, one
    after the other)."""
    import fast_downward

    translate = fast_downward.pddl2sas
    if getattr(translate, "once", False):
        return
    last: dict[tuple[str, str], Any] = {}

    def once(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
        if optimize and (domain, problem) in last:
            return last.pop((domain, problem))
        if optimize or verbose:
            return translate(domain, problem, verbose=verbose, optimize=optimize)
        argv = sys.argv  # the translator sets sys.argv for its option parser
        try:
            result = kept.get("sas", (domain, problem), lambda: translate(domain, problem))
        finally:
            sys.argv = argv
        last.clear()
        last[(domain, problem)] = result
        return result

    once.once = True  # type: ignore[attr-defined]
    fast_downward.pddl2sas = once


def _loadable_library_copies() -> None:
    """fast-downward's ``load_lib`` copies its library's file for each game: make it copy the file's loadable part (up to
    the end of the last segment its program headers map, without section headers), written once into this process's
    memory. Left as it is when the file is not a 64-bit little-endian ELF shared object or memory files are missing."""
    from fast_downward import interface

    source = str(interface.DOWNWARD_LIB_PATH)
    if source.startswith("/proc/self/fd/"):
        return
    try:
        image = _loadable_part(Path(source).read_bytes())
        if image is None:
            return
        fd = os.memfd_create("libdownward.so")  # not inherited by children; kept open for the process's life
        with open(fd, "wb", closefd=False) as handle:
            handle.write(image)
    except (OSError, AttributeError):  # no memfd_create (not Linux): the whole file is copied, as TextWorld does
        return
    interface.DOWNWARD_LIB_PATH = f"/proc/self/fd/{fd}"


def _loadable_part(data: bytes) -> bytes | None:
    """An ELF64 little-endian shared object cut after the last byte its program headers map, its section headers
    dropped (the dynamic loader reads program headers only); None for anything else."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 or len(data) < 64:
        return None
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    end = phoff + phentsize * phnum
    for i in range(phnum):
        p_offset, p_filesz = struct.unpack_from("<Q", data, phoff + i * phentsize + 8)[0], struct.unpack_from("<Q", data, phoff + i * phentsize + 32)[0]
        end = max(end, p_offset + p_filesz)
    if end > len(data):
        return None
    image = bytearray(data[:end])
    struct.pack_into("<Q", image, 0x28, 0)  # e_shoff: no section headers
    struct.pack_into("<HH", image, 0x3C, 0, 0)  # e_shnum, e_shstrndx
    return bytes(image)


def _memoise_template_parses() -> None:
    """Make TextWorld's grammar-template parser remember its results (a copy per use: the derivation writes its
    context into the symbols)."""
    from textworld.envs.pddl import textgen

    parse = textgen._parse_and_convert
    if getattr(parse, "memoised", False):
        return
    remembered = functools.lru_cache(maxsize=_PARSES_KEPT)(lambda text, rule_name, trace: parse(text, rule_name=rule_name, trace=trace))

    def memoised(text: str, rule_name: str = "symbols", trace: bool = False) -> Any:
        return _copy_symbols(remembered(text, rule_name, bool(trace)))

    memoised.memoised = True  # type: ignore[attr-defined]
    textgen._parse_and_convert = memoised


def _memoise_rule_parses() -> None:
    """Make TextWorld's logic parser remember its parses of the conditions of grammar rules
    (``Rule.parse_conjunctive_query``, asked at every derivation): a list of predicates, a new list per use (the
    predicates and their placeholders are values TextWorld never changes: it hashes them into sets)."""
    from textworld import logic

    parse = logic._parse_and_convert
    if getattr(parse, "memoised", False):
        return

    @functools.lru_cache(maxsize=_PARSES_KEPT)
    def remembered(text: str) -> tuple[Any, ...]:
        return tuple(parse(text, rule_name=_QUERY_RULE))

    def memoised(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and kwargs == {"rule_name": _QUERY_RULE} and isinstance(args[0], str):
            return list(remembered(args[0]))
        return parse(*args, **kwargs)

    memoised.memoised = True  # type: ignore[attr-defined]
    logic._parse_and_convert = memoised


def _copy_symbols(symbols: list[Any]) -> list[Any]:
    """What ``copy.deepcopy`` makes of a list of TextWorld grammar symbols whose contexts are empty (a grammar rule's
    right-hand side, a parsed template), without walking them generically: a new object per symbol (nested
    symbols too) with a new empty context."""
    return [_copy_symbol(symbol) for symbol in symbols]


def _copy_symbol(symbol: Any) -> Any:
    from textworld.envs.pddl.textgen import Symbol

    if symbol.context:  # a symbol carrying a derivation's context: the generic deep copy, as TextWorld does
        return copy.deepcopy(symbol)
    kind = type(symbol)
    twin = kind.__new__(kind)
    twin.__dict__.update(symbol.__dict__)
    twin.context = {}
    for name in ("symbol", "expression"):  # ListSymbol.symbol, ConditionalSymbol.expression
        inner = symbol.__dict__.get(name)
        if isinstance(inner, Symbol):
            setattr(twin, name, _copy_symbol(inner))
    return twin


def _light_derivations() -> None:
    """TextWorld's text derivation deep-copies the variables and mapping of a context at every symbol (a third of a
    game's time): their values (entity infos, placeholders, variables) are only read (``{o.name}``), so a new dict
    holding the same values derives the same text; rule right-hand sides and templates are copied with
    ``_copy_symbols`` instead of the generic deep copy."""
    from textworld.envs.pddl import textgen

    if getattr(textgen.copy_context, "light", False):
        return

    def copy_context(context: dict[str, Any]) -> dict[str, Any]:
        return {"state": context["state"], "facts": context["facts"], "variables": dict(context["variables"]),
                "mapping": dict(context["mapping"]), "entity_infos": context["entity_infos"]}  # fmt: skip

    def symbol_copy(self: Any, context: dict[str, Any]) -> Any:
        twin = _copy_symbol(self)
        twin.context = copy_context(context)
        return twin

    def replace(self: Any, start: Any) -> list[Any]:
        rules = self._rules.get(str(start))
        if not rules:
            raise textgen.CSGUnknownSymbolError(start)

        def applicable(rule: Any) -> bool:
            if not rule.condition:
                return True
            query = textgen.Rule.parse_conjunctive_query(rule.condition)
            return len(list(start.context["state"].all_assignments(query, start.context["mapping"]))) > 0

        chosen = next((rule for rule in rules if applicable(rule)), None)
        if chosen is None:
            raise IndexError("list index out of range")  # what TextWorld's rules[0] raises when none applies
        symbols = _copy_symbols(chosen.rhs)
        for symbol in symbols:
            symbol.context = copy_context(start.context)
        return symbols

    copy_context.light = True  # type: ignore[attr-defined]
    textgen.copy_context = copy_context
    textgen.Symbol.copy = symbol_copy
    textgen.ContextSensitiveGrammar.replace = replace
    # its debug flags, read from the environment at every symbol: this process's environment never changes
    textgen.check_flag = functools.lru_cache(maxsize=None)(textgen.check_flag)


def _sorted_facts() -> None:
    """TextWorld sorts a state's facts of a signature (Python comparisons) at every step of every condition it checks;
    the state hands them out already sorted, kept while that set of facts is unchanged, so the sort is one pass."""
    from textworld.logic import State

    if getattr(State.facts_with_signature, "sorted", False):
        return

    def facts_with_signature(self: Any, sig: Any) -> Any:
        facts = self._facts.get(sig, frozenset())
        kept = self.__dict__.setdefault("_sorted_facts", {})
        hit = kept.get(sig)
        if hit is not None and hit[0] == facts:
            return hit[1]
        ordered = tuple(sorted(facts))
        kept[sig] = (frozenset(facts), ordered)
        return ordered

    facts_with_signature.sorted = True  # type: ignore[attr-defined]
    State.facts_with_signature = facts_with_signature


class _Host:
    """The live games of this process."""

    def __init__(self, kept: _Kept) -> None:
        import fast_downward
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs.pddl.pddl import PddlEnv

        from textworld.envs.pddl import logic as pddl_logic

        _memoise_template_parses()
        _memoise_rule_parses()
        _light_derivations()
        _sorted_facts()
        _keep_translations(kept)
        _loadable_library_copies()
        self.kept = kept
        host = self
        build_state = pddl_logic.PddlState
        build_logic = pddl_logic.GameLogic

        def kept_logic(domain: str, grammar: str) -> Any:
            pddl_logic.GameLogic = build_logic  # the class itself again before its object is made and pickled
            return kept.get("logic", (domain, grammar), lambda: build_logic(domain=domain, grammar=grammar))

        class _PooledPddlEnv(PddlEnv):  # type: ignore[misc]
            """TextWorld's PDDL environment taking its fast-downward library from the free list, and whose
            first reset reuses the planner state its load built."""

            def __init__(self, infos: Any) -> None:
                textworld.Environment.__init__(self, infos)
                self.downward_lib = host.free_libs.pop() if host.free_libs else fast_downward.load_lib()
                host.libraries = max(host.libraries, len(host.games) + 1)
                self._loaded_state: Any = None

            def load(self, filename_or_data: Any) -> None:
                pddl_logic.GameLogic = kept_logic  # TextWorld's load builds the game's logic by this name
                try:
                    super().load(filename_or_data)
                finally:
                    pddl_logic.GameLogic = build_logic
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
        times = os.times()
        return {"rss_bytes": rss, "live": len(self.games), "libraries": self.libraries, "opened": self.opened,
                "kept_hits": self.kept.hits, "kept_misses": self.kept.misses, "cpu_seconds": times.user + times.system}


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


def _fork_fds() -> list[tuple[int, int, int]]:
    spec = os.environ.pop(FORK_FDS_VARIABLE, "")
    return [(int(a), int(b), int(c)) for a, b, c in (part.split(",") for part in spec.split(";") if part)]


def _fork_workers(out: Any, forks: list[tuple[int, int, int]], children: list[int]) -> Any:
    """Fork a worker for each of ``forks`` (its stdin, answers and stderr descriptors) from this process, whose imports and
    patches are done: each child serves its own pipes with a copy of this process's (still empty) host; their pids are
    added to ``children``. Returns the answer stream the caller serves: its own in this process, the child's in a child."""
    for i, (stdin, answers, stderr) in enumerate(forks):
        pid = os.fork()
        if pid == 0:
            os.dup2(stdin, 0)
            os.dup2(stderr, 2)
            os.dup2(2, 1)
            mine = os.fdopen(answers, "wb")
            out.close()  # the parent's answers: its engine sees its end when it exits, not when its children do
            for fd in {fd for fds in forks[i + 1 :] for fd in fds} | {stdin, stderr}:
                with contextlib.suppress(OSError):
                    os.close(fd)
            children.clear()
            return mine
        children.append(pid)
        for fd in (stdin, answers, stderr):
            os.close(fd)
    return out


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the engine's own prints must not mix with the answers
    sys.stdout = sys.stderr
    folder = os.environ.get(KEPT_FOLDER_VARIABLE)
    forks = _fork_fds()
    try:
        host = _Host(_Kept(Path(folder) if folder else None))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises EnvUnavailableError
        _answer(out, {"id": 0, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return  # the workers it would have forked see their pipes closed: they did not start
    children: list[int] = []
    out = _fork_workers(out, forks, children)
    try:
        _serve(host, out)
    finally:
        for pid in children:  # reaped here (their CPU counts as this process's children's): they end with their stdin
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _serve(host: _Host, out: Any) -> None:
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
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown (~0.15 s of CPU freeing the games' objects): every answer is flushed, kept work written
