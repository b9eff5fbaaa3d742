"""Mock-model policies for ``ltp``: a deterministic host (``judge``) and two players.

``judge`` recognises the request type from the fixed lead-ins of ``prompts.py`` and decides from the
task's truth and answer keys by word overlap (characters for Chinese):
  * answer: share of the question's content words found in the truth/answer keys: >= 0.75 "yes",
    >= 0.4 "no", else "irrelevant";
  * restatement: the question without its lead-in ("Is it true that ..."), as a statement (negated for
    the "opposite" request); merge: the facts joined; comparison: "yes" if Sentence 2 (minus negated
    sentences) holds >= 80% of Sentence 1's content words.

``oracle`` asks one question per answer key, in order, phrased "Is it true that <key>?" (long enough for
the upstream length filter, rephrased if it would look like a story repeat or contain an invalid phrase),
then cycles through them again until the round cap. ``weak`` picks a failure mode per task.
"""

from __future__ import annotations

import functools
import re

from ...environment import Policy, PolicyReply, PolicyRequest, stable_choice
from .bleu import char_unigram_bleu
from .data import key_lines
from .prompts import EN, PROMPTERS, Prompter, known_prompters
from .session import STORY_REPEAT_BLEU

_EN_STOP = frozenset(
    """a an the and or but if then so of to in on at by for with from into onto about as is are was were be been
    being am do does did doing have has had having it its it's this that these those there here he she they we you i
    me him her them us my his their our your who whom whose which what when where why how not no yes any some
    all can could would should will shall may might must just also very than too up down out off over again
    true really case happen happened""".split()
)
_ZH_STOP = frozenset("的了是吗呢吧啊在有和与也都就不没么个这那一他她它们我你")
_EN_LEADIN = re.compile(r"^\s*is it true(?:,[^,]*,)? that\s+", re.IGNORECASE)
_ZH_LEADIN = re.compile(r"^\s*(?:根据[^，]*，)?是不是")
_EN_NEGATION = "It is not true that "
_ZH_NEGATION = "并非"


def _prompter(req: PolicyRequest) -> Prompter:
    """The project's prompter in the wording the task is played in (the ``prompter`` option; older tasks: their language)."""
    data = req.task.data
    return PROMPTERS.get(str(data.get("prompter", data.get("language", "en"))), EN)


def _language(req: PolicyRequest) -> str:
    """The puzzles' language (words are compared in it: characters for Chinese, whatever the wording)."""
    return str(req.task.data.get("language", "en"))


def _tokens(text: str, language: str) -> set[str]:
    if language == "zh":
        chars = {ch for ch in text if "\u4e00" <= ch <= "\u9fff" and ch not in _ZH_STOP}
        return chars | {w for w in re.findall(r"[a-z0-9]+", text.lower())}
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {w for w in words if w not in _EN_STOP}


def _body(question: str, language: str) -> str:
    """The claim inside a question: lead-in and final punctuation removed."""
    if language == "zh":
        text = _ZH_LEADIN.sub("", question.strip())
        return text.rstrip("？?。.！! ").removesuffix("吗")
    text = _EN_LEADIN.sub("", question.strip()).rstrip("?.! ")
    return text[:1].upper() + text[1:]


# -- judge ----------------------------------------------------------------------------------------


def _judge_answer(req: PolicyRequest, p: Prompter) -> str:
    language = p.language
    question = (req.messages[-1].get("content") or "").removesuffix(p.answer_instruction)
    asked = _tokens(_body(question, language), _language(req))
    truth = _tokens(req.task.data["truth"] + "\n" + req.task.data["answer_keys"], _language(req))
    share = len(asked & truth) / len(asked) if asked else 0.0
    if share >= 0.75:
        return "是。" if language == "zh" else "Yes."
    if share >= 0.4:
        return "不是。" if language == "zh" else "No."
    return "无关。" if language == "zh" else "Irrelevant."


def _restate(text: str, p: Prompter, negate: bool) -> str:
    body = _body(text, p.language)
    if p.language == "zh":
        return f"{_ZH_NEGATION if negate else ''}{body}。"
    if negate:
        return f"{_EN_NEGATION}{body[:1].lower() + body[1:]}."
    return f"{body}."


def _label(template: str, field: str) -> str:
    """What precedes ``{field}`` on its line of a prompter's compare template (``Sentence 1: ``, ``句子1：``)."""
    return template.split("{" + field + "}")[0].rsplit("\n", 1)[-1]


def _compare(content: str, p: Prompter, language: str) -> str:
    key = re.search(f"^{re.escape(_label(p.compare, 'key'))}(.*)", content, re.M)
    merged = re.search(f"^{re.escape(_label(p.compare, 'merged'))}(.*)", content, re.M | re.S)
    if p.language == "zh":
        sentences = re.split(r"(?<=。)", merged.group(1) if merged else "")
        kept = " ".join(s for s in sentences if not s.strip().startswith(_ZH_NEGATION))
    else:
        sentences = re.split(r"(?<=[.!?])\s+", merged.group(1) if merged else "")
        kept = " ".join(s for s in sentences if not s.startswith(_EN_NEGATION))
    wanted = _tokens(key.group(1) if key else "", language)
    covered = len(wanted & _tokens(kept, language)) / len(wanted) if wanted else 0.0
    if covered >= 0.8:
        return "是" if p.language == "zh" else "Yes"
    return "不是" if p.language == "zh" else "No"


def judge(req: PolicyRequest) -> PolicyReply:
    first = req.messages[0].get("content") or "" if req.messages else ""
    text = first.partition("\n")[2]
    # the project's wording or upstream's (read from --data-dir in this process), in either language (v0.2 hosts the
    # Chinese puzzles in English): each knows its own lead-ins
    for p in known_prompters():
        if len(req.messages) > 1 and first.startswith(p.host_intro.split("{")[0][:40]):
            return PolicyReply(content=_judge_answer(req, p))
        if first.startswith(p.restate_no + "\n"):
            return PolicyReply(content=_restate(text, p, negate=True))
        if first.startswith(p.restate_yes + "\n"):
            return PolicyReply(content=_restate(text, p, negate=False))
        if first.startswith(p.merge + "\n"):
            return PolicyReply(content=text.strip())
        if first.startswith(p.compare.split("\n")[0]):
            return PolicyReply(content=_compare(first, p, _language(req)))
    return PolicyReply(content="Irrelevant.")


# -- players --------------------------------------------------------------------------------------

_EN_FORMS = (
    "Is it true that {k}?",
    "Is it true, according to the truth of this puzzle, that {k}?",
    "Is it true, going by everything that really happened in the hidden truth of this puzzle, that {k}?",
)
_ZH_FORMS = ("是不是{k}？", "根据汤底，是不是{k}？", "根据汤底以及真实发生的全部经过来判断，是不是{k}？")


def _defuse(text: str, p: Prompter) -> str:
    """Keep a key's words but break any invalid phrase it contains ("new game" -> "new  game"), the project's and
    upstream's (read in this process) of the wording."""
    for phrase in dict.fromkeys(ph for q in known_prompters() if q.language == p.language for ph in q.invalid_phrases):
        if phrase in text:
            text = text.replace(phrase, phrase.replace(" ", "  ") if " " in phrase else " ".join(phrase))
    return text


def oracle_question(key: str, story_keys: list[str], p: Prompter) -> str:
    """A question that states ``key``, is not mistaken for a story repeat and is not invalid."""
    body = _defuse(key.rstrip("。.!！ "), p)
    forms = _ZH_FORMS if p.language == "zh" else _EN_FORMS
    question = forms[0].format(k=body)
    for form in forms:
        question = form.format(k=body)
        hypothesis = question.replace("?", ".")
        if all(char_unigram_bleu(sk, hypothesis) <= STORY_REPEAT_BLEU for sk in story_keys):
            return question
    return question


def _plan(req: PolicyRequest) -> list[str]:
    data = req.task.data
    return list(_questions(data["answer_keys"], data["story_keys"], _prompter(req).language))


@functools.lru_cache(maxsize=4096)
def _questions(answer_keys: str, story_keys: str, wording: str) -> tuple[str, ...]:
    """The oracle's questions for a puzzle, one per answer key, phrased in the game's wording (cached: the same for
    every round)."""
    p = PROMPTERS[wording]
    stories = key_lines(story_keys)
    return tuple(oracle_question(k, stories, p) for k in key_lines(answer_keys))


def oracle(req: PolicyRequest) -> PolicyReply:
    plan = _plan(req)
    return PolicyReply(content=plan[req.turn % len(plan)])


_OFF_TOPIC = (
    "Is the weather sunny?",
    "Does the puzzle involve a purple elephant?",
    "Was anyone playing chess on the moon?",
    "Is a spaceship part of it?",
)
WEAK_MODES = ("abort", "context_length", "off_topic", "empty", "partial")


def weak(req: PolicyRequest) -> PolicyReply:
    """One failure mode per task (from the task id), so a suite shows every status ltp can end with."""
    mode = WEAK_MODES[stable_choice(req.task.task_id, len(WEAK_MODES))]
    if mode == "abort":  # invalid questions: the third one ends the game (completed, progress 0)
        # (invalid in the project's wording and in upstream's: ZHPrompter's phrases are 感谢/谢谢/再见)
        return PolicyReply(content="Great job! Can we play a new game now?" if _prompter(req).language == "en" else "Great job! 谢谢，再见！")
    if mode == "context_length":  # one key uncovered, then the provider's context-window error:
        # context_limit_exceeded with the progress made so far (as upstream)
        return PolicyReply(content=_plan(req)[0]) if req.turn == 0 else PolicyReply(fail="context_length")
    if mode == "off_topic":  # irrelevant questions until the round cap -> task_limit_exceeded, progress 0
        return PolicyReply(content=_OFF_TOPIC[req.turn % len(_OFF_TOPIC)])
    if mode == "empty":  # one question, then an empty reply -> completed
        return PolicyReply(content=_OFF_TOPIC[0] if req.turn == 0 else "")
    # partial: repeat the story (hint), then uncover only the first half of the keys
    plan = _plan(req)
    story_keys = key_lines(req.task.data["story_keys"])
    if req.turn % 2 == 0:
        return PolicyReply(content=story_keys[(req.turn // 2) % len(story_keys)])
    half = plan[: max(1, len(plan) // 2)]
    return PolicyReply(content=half[(req.turn // 2) % len(half)])


POLICIES: dict[str, Policy] = {"oracle": oracle, "weak": weak, "judge": judge}
