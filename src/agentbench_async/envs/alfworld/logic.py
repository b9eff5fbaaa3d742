"""The ALFWorld 2.1.1 PDDL domain and TextWorld grammar that AgentBench v0.2's games embed.

alfworld >= 0.4 ships the 2.1.2 versions (``alfworld/data/alfred.pddl`` and ``alfred.twl2``), which differ
from 2.1.1 in exactly three ways: an extra ``help`` action, ``move {o} to {r}`` instead of
``put {o} in/on {r}`` (feedback ``You move the ...`` instead of ``You put the ... in/on the ...``), and
``You arrive at <receptacle>.`` instead of ``You arrive at loc N.``. AgentBench's one-shot examples and
its observation clean-up depend on the 2.1.1 forms, so the built-in games are written with logic derived
here from the installed package by undoing those changes; each edit must apply exactly once, so a
changed upstream file fails loudly instead of producing a different game.
"""

from __future__ import annotations

from pathlib import Path

_GRAMMAR_EDITS = (
    ('"rhs": "You arrive at {r.name}. #examineReceptacle.feedback#"', '"rhs": "You arrive at {lend.name}. #examineReceptacle.feedback#"'),
    ('"rhs": "You move the {o.name} to the {r.name}."', '"rhs": "You put the {o.name} in/on the {r.name}."'),
)
_TEMPLATE_212 = 'template :: "move {o} to {r}";'
_TEMPLATE_211 = 'template :: "put {o} in/on {r}";'


class LogicError(RuntimeError):
    """The installed alfworld package's logic files are not the 2.1.2 files this conversion expects."""


def package_logic_dir() -> Path:
    """Where the installed alfworld package keeps ``alfred.pddl`` and ``alfred.twl2``."""
    import alfworld  # the optional dependency; imported only when games are built

    return Path(alfworld.__file__).resolve().parent / "data"


def _replace_once(text: str, old: str, new: str, count: int, what: str) -> str:
    found = text.count(old)
    if found != count:
        raise LogicError(f"alfworld logic: expected {count} x {old!r} in {what}, found {found}")
    return text.replace(old, new)


def domain_211(domain_212: str) -> str:
    """The 2.1.1 PDDL domain: the 2.1.2 one without its ``help`` action."""
    start = domain_212.find("(:action help")
    if start < 0:
        raise LogicError("alfworld logic: no '(:action help' in alfred.pddl")
    end = domain_212.find("\n)\n", start)
    if end < 0:
        raise LogicError("alfworld logic: the 'help' action of alfred.pddl is not closed")
    return domain_212[:start] + domain_212[end + 3 :].lstrip("\n")


def grammar_211(grammar_212: str) -> str:
    """The 2.1.1 grammar: no ``help`` action, ``put ... in/on ...``, ``You arrive at loc N.``"""
    start = grammar_212.find("\naction help {")
    if start < 0:
        raise LogicError("alfworld logic: no 'action help' in alfred.twl2")
    text = grammar_212[:start]
    for old, new in _GRAMMAR_EDITS:
        text = _replace_once(text, old, new, 1, "alfred.twl2")
    return _replace_once(text, _TEMPLATE_212, _TEMPLATE_211, 2, "alfred.twl2")


def load_logic_211(folder: Path | None = None) -> tuple[str, str]:
    """(domain, grammar) in the 2.1.1 form, from the installed alfworld package (or ``folder``)."""
    folder = folder or package_logic_dir()
    domain = (folder / "alfred.pddl").read_text(encoding="utf-8")
    grammar = (folder / "alfred.twl2").read_text(encoding="utf-8")
    return domain_211(domain), grammar_211(grammar)
