"""What the player and the host (judge model) are told, in English and Chinese.

The structure follows AgentBench v0.2 (see ``docs/envs/ltp.md``). With ``--data-dir`` the wording is upstream's own,
read from ``upstream-prompts/v0.2/src/server/tasks/ltp/task.py`` (``ENPrompter``/``ZHPrompter``, whose methods are
evaluated from their source, nothing run: ``load_prompter``); without it (``EN``/``ZH``) it is this project's own
(the deviation ``ltp.prompts``), and so are the phrases that make a question invalid and the beginnings of a yes or
no answer (upstream's ``check_solver_valid``, ``check_yes``, ``check_no``). The judge requests start with fixed
lead-ins (``restate_yes``, ``restate_no``, ``merge``, ``compare`` and the host primer) so the built-in mock judge can
tell the request types apart; a prompter read from upstream's file is registered (``known_prompters``) so the mock
judge knows its lead-ins too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path

from ..upstream_prompts import V02, UpstreamSource, upstream_source


@dataclass(frozen=True)
class Prompter:
    language: str
    player_intro: str  # "{story}" is filled in
    invalid_hint: str
    story_hint: str
    host_intro: str  # "{story}", "{truth}", "{rules}"
    host_rules: str
    ack: str
    ask_story_keys: str
    ask_answer_keys: str
    ask_rules: str
    start: str
    start_reply: str  # "{story}"
    answer_instruction: str  # appended to every question sent to the host
    known_ack: str  # the host's scripted reply after the known facts
    restate_yes: str
    restate_no: str
    merge: str
    compare: str  # "{key}", "{merged}"
    invalid_phrases: tuple[str, ...]  # case-sensitive substrings that make a message an invalid question
    yes_prefixes: tuple[str, ...]  # a host reply (stripped) starting with one of these is a yes
    no_prefixes: tuple[str, ...]  # ... a no


_EN_INVALID = (
    "new story",
    "other story",
    "new game",
    "other game",
    "new question",
    "other question",
    "other round",
    "new round",
    "Great job",
    "further question",
)

EN = Prompter(
    language="en",
    player_intro=(
        "You are the player in a Lateral Thinking Puzzle, also known as a Situation Puzzle, a game of deductive "
        "reasoning. How you play:\n"
        "1. You are given a short, puzzling story. Behind it is a hidden truth that explains it.\n"
        '2. Uncover the truth by asking the host questions that can be answered with "yes", "no" or "irrelevant".\n'
        "3. Use every answer to narrow down what really happened, until you have guessed the truth.\n"
        "4. Ask exactly one question per message.\n"
        "5. You are the player: you may not end the game, give up, or ask for a different puzzle.\n"
        "6. Do not ask about things the story already tells you.\n"
        '7. Do not ask "why" outright and do not ask the host to reveal the story; reason it out yourself.\n'
        "Remember: one question at a time, and only questions the host can answer with yes, no or irrelevant.\n\n"
        "The story:\n{story}\n\n"
        'Start guessing the truth: I will answer your questions, which must be answerable with "yes", "no" or '
        '"irrelevant".'
    ),
    invalid_hint='Keep guessing the truth from the story: ask a question that can be answered with "yes", "no" or "irrelevant".',
    story_hint="The story already tells you that. Ask a new question.",
    # The host's requests carry what AgentBench v0.2's do, as strictly (the answer requests ask for "yes", "no"
    # or "irrelevant" without an "only"; the rules restrict the answers as upstream's do); our wording.
    host_intro=(
        "I need you to host a game called Lateral Thinking Puzzle.\n\n"
        "A Lateral Thinking Puzzle consists of a story and a truth. Your story: '{story}'\n"
        "Your truth: '{truth}'\n\n"
        "The rules of the game:\n{rules}\n\n"
        "Keep to these rules throughout the game so the user enjoys it. Read each question carefully and make every "
        "answer agree with both the rules and the truth. When the user asks to play, give them the story and help "
        'them guess the truth by answering with "yes", "no" or "irrelevant". With every answer, make sure you have '
        "fully understood and are following the rules, the story and the truth, so that you are never unable to "
        "answer and never break a rule."
    ),
    host_rules=(
        '1. You know both the "story" and the "truth". When a user wants to play, you give them the "story"; the '
        'user knows only the "story", not the "truth".\n'
        '2. The user asks questions that can be answered with "yes", "no" or "irrelevant", aiming to guess the '
        '"truth". Answer each question with "yes", "no" or "irrelevant", deciding from the "truth", to lead the '
        "user towards the right truth.\n"
        '3. If the user asks for details of the truth directly with a "why" question, tell them they have to '
        "guess it themselves.\n"
        "4. Understand the truth completely and interpret it accurately. Answer from the truth and the user's "
        "earlier questions; a question need not contain anything of the truth, but your answer must agree with "
        "the facts of the truth.\n"
        '5. Answer "irrelevant" only when the truth gives neither a direct nor an indirect answer: that is the '
        'only case for "irrelevant"; otherwise answer "yes" or "no".\n'
        "6. Never tell the user what the truth says, even when they ask for it directly.\n"
        "7. Judge each question as a whole and grasp what the user means overall; do not answer from one detail "
        "alone; your answer must agree with the facts of the truth.\n"
        "8. When the user has guessed part of the truth but still misses some of it, you may hint at where to "
        "start, but you may not reveal the truth directly."
    ),
    ack=(
        "Understood: I am the host of the Lateral Thinking Puzzle and will help the user guess the truth by "
        "answering their questions. I have taken in everything about the story and the truth and read all the "
        "rules carefully, and I will follow every rule throughout the game."
    ),
    ask_story_keys="Summarize the key points of the story, so I can check that you have understood it.",
    ask_answer_keys="Summarize the key points of the truth, so I can check that you have understood it.",
    ask_rules="Restate the rules, so I can check that you have understood all of them.",
    start=(
        "Good, the game can start now. Before every answer, go over the key points of the story, the key points "
        'of the truth and the rules. Answer with "yes", "no" or "irrelevant".'
    ),
    start_reply=(
        "Understood. As the host I will follow the rules above and make every answer agree with the rules and the "
        "truth. Here is your story:\n{story}\n\nStart guessing the truth and I will answer your questions. "
        'Remember that your questions must be answerable with "yes", "no" or "irrelevant".'
    ),
    answer_instruction='\nReply with "yes", "no" or "irrelevant".',
    known_ack="Yes.",
    restate_yes="Rewrite the following as a declarative sentence, simplified to one sentence:",
    restate_no="Rewrite the following as a declarative sentence with the opposite meaning, simplified to one sentence:",
    merge="Simplify the following into one sentence:",
    compare=(
        "Compare the information in Sentence 1 and Sentence 2: does Sentence 2 contain all of the information in "
        'Sentence 1, including its key details and descriptions? Answer with "yes" or "no".\n'
        "Sentence 1: {key}\n"
        "Sentence 2: {merged}"
    ),
    invalid_phrases=_EN_INVALID,
    yes_prefixes=("Yes", "yes"),
    no_prefixes=("No", "no"),
)

ZH = Prompter(
    language="zh",
    player_intro=(
        "你是一场海龟汤（情境推理谜题）游戏的玩家。\n"
        "玩法：\n"
        "1. 你会得到一个令人费解的小故事（汤面），它背后有一个能解释一切的真相（汤底）。\n"
        "2. 通过向主持人提问来找出真相，问题必须能用“是”、“不是”或“无关”回答。\n"
        "3. 根据每个回答逐步缩小范围。\n"
        "4. 每条消息只问一个问题。\n"
        "5. 你是玩家：不能结束游戏、不能放弃，也不能要求换一道题。\n"
        "6. 不要询问故事里已经说明的内容。\n"
        "7. 不要直接问“为什么”，也不要让主持人讲出故事，要自己推理。\n"
        "记住：一次一个问题，只问能用是、不是或无关回答的问题。\n\n"
        "汤面：\n{story}\n\n"
        "请提出你的第一个问题。"
    ),
    invalid_hint="这对解谜没有帮助。请继续寻找真相：提出一个能用“是”、“不是”或“无关”回答的问题。",
    story_hint="汤面里已经说过这一点了。请问一些汤面没有提到的事情。",
    host_intro=(
        "我需要你主持一个叫海龟汤的游戏。\n\n"
        "海龟汤由汤面和汤底组成。你的汤面：'{story}'\n"
        "你的汤底：'{truth}'\n\n"
        "游戏规则：\n{rules}\n\n"
        "整场游戏都要遵守这些规则，让用户玩得愉快。仔细理解每个问题，保证回答既符合规则又符合汤底。用户要玩时，"
        "给出汤面，并通过回答“是”、“否”或“无关”帮助用户猜出汤底。每次回答都要确保自己充分理解并遵守了规则、"
        "汤面和汤底，不要出现无法回答的情况，更不要违反规则。"
    ),
    host_rules=(
        "1. 你知道汤面和汤底。用户想玩海龟汤时，把汤面给用户；用户只知道汤面，不知道汤底。\n"
        "2. 用户提出能用“是”、“否”或“无关”回答的问题，目的是猜出汤底；你依据汤底，只能用“是”、“否”或“无关”回答，"
        "引导用户猜到正确的汤底。\n"
        "3. 如果用户直接用“为什么”的形式询问汤面的细节，告诉用户需要自己猜测。\n"
        "4. 充分理解并准确解读汤底，依据汤底和用户之前的提问作答；用户的提问不一定包含汤底的信息，但你的回答必须符合汤底的事实。\n"
        "5. 只有当汤底既不直接也不间接回答这个问题时，才回答“无关”，这是回答“无关”的唯一条件；其他时候回答“是”或“否”。\n"
        "6. 不能直接把汤底的信息告诉用户，即使用户直接问也不行。\n"
        "7. 整体理解用户的提问，不能只凭某一点作答，回答必须符合汤底的事实。\n"
        "8. 用户猜到部分真相、但与完整的汤底还有差距时，可以给一些切入点提示，但不能直接透露汤底的信息。"
    ),
    ack="好的，我明白我是海龟汤的主持人，要通过回答用户的问题帮助用户猜出汤底。我已充分理解汤面和汤底的全部信息，认真读过所有规则，保证在游戏中遵守所有规则。",
    ask_story_keys="请总结汤面的要点，以确认你理解了汤面。",
    ask_answer_keys="请总结汤底的要点，以确认你理解了汤底。",
    ask_rules="请复述规则，以确认你理解了所有规则。",
    start="游戏现在开始。每次回答前，请回顾汤面要点、汤底要点和规则，回答“是”、“否”或“无关”。",
    start_reply="好的，作为主持人，我会遵守以上规则，保证回答符合规则和汤底。下面是你的汤面：\n{story}\n\n你可以开始猜测汤底，我会回答你的问题。请注意，你的问题要能用“是”、“否”或“无关”回答。",
    answer_instruction="\n请回答“是”、“否”或“无关”。",
    known_ack="是。",
    restate_yes="把下面的内容改写成一个简单的陈述句：",
    restate_no="把下面的内容改写成一个意思相反的简单陈述句：",
    merge="把下面的内容简化成一句话：",
    compare=(
        "比较下面两个句子的信息：句子2是否完整包含句子1的全部信息，包括关键细节和描述？请用是或否回答。\n"
        "句子1：{key}\n"
        "句子2：{merged}"
    ),
    invalid_phrases=_EN_INVALID + ("新故事", "换个故事", "新游戏", "换个游戏", "新问题", "下一题", "新一轮", "下一轮"),
    yes_prefixes=("Yes", "yes", "是"),
    no_prefixes=("No", "no", "不是", "否"),
)

PROMPTERS: dict[str, Prompter] = {"en": EN, "zh": ZH}


UPSTREAM_TASK = "src/server/tasks/ltp/task.py"  # v0.2's ENPrompter / ZHPrompter and LateralThinkingPuzzle
_UPSTREAM_CLASS = {"en": "ENPrompter", "zh": "ZHPrompter"}
_REGISTERED: list[Prompter] = []


def _slot(name: str) -> str:
    return f"\x00{name}\x00"


def _template(text: str, *names: str) -> str:
    """Upstream text with the slots of ``names`` as ``str.format`` fields (its own braces doubled)."""
    out = text.replace("{", "{{").replace("}", "}}")
    for name in names:
        out = out.replace(_slot(name), "{" + name + "}")
    return out


def _tested(source: UpstreamSource, method: str, test: str) -> tuple[str, ...]:
    """The strings a predicate method of upstream's tests its parameter against, in source order: ``"x" in p`` terms of
    ``not (... or ...)`` (``test`` "in": check_solver_valid) or ``p.startswith("x")`` terms of ``... or ...``
    ("startswith": check_yes/check_no). Another shape is a TaskFileError naming the file and the method."""
    returns = [n for n in ast.walk(source.function(method)) if isinstance(n, ast.Return) and n.value is not None]
    node = returns[0].value if len(returns) == 1 else None
    if test == "in":
        node = node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) else None
    terms = node.values if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) else [node] if node else []
    out = []
    for term in terms:
        if test == "in" and isinstance(term, ast.Compare) and [type(op) for op in term.ops] == [ast.In]:
            value = term.left
        elif test == "startswith" and isinstance(term, ast.Call) and isinstance(term.func, ast.Attribute) \
                and term.func.attr == "startswith" and len(term.args) == 1 and not term.keywords:  # fmt: skip
            value = term.args[0]
        else:
            value = None
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
            raise source.error(f"{method} is not the {test} test of strings this reader knows")
        out.append(value.value)
    if not out:
        raise source.error(f"{method} is not the {test} test of strings this reader knows")
    return tuple(out)


def load_prompter(data_dir: Path, language: str) -> Prompter:
    """Upstream's wording in ``language`` (``en``: ENPrompter, ``zh``: ZHPrompter), read from v0.2's ltp/task.py under
    ``data_dir``; a missing or changed file is a one-line TaskFileError naming it. Which one plays is the ``prompter``
    option: v0.2's start_sample used ENPrompter for every puzzle set, so ``en`` is the default for the Chinese set too."""
    source = upstream_source(data_dir, V02, UPSTREAM_TASK, env="ltp")
    cls = _UPSTREAM_CLASS[language]

    def said(method: str, **arguments: str) -> str:
        text = source.rendered(f"{cls}.{method}", **arguments)
        if not isinstance(text, str):
            raise source.error(f"{cls}.{method} does not return text")
        return text

    def lead(method: str, parameter: str) -> str:  # "<lead>\n<parameter>": the lead
        text = said(method, **{parameter: _slot(parameter)})
        if not text.endswith("\n" + _slot(parameter)):
            raise source.error(f"{cls}.{method} no longer ends with its {parameter}")
        return text[: -len(_slot(parameter)) - 1]

    host = source.rendered(f"{cls}.hosting_instruction", story=_slot("story"), answer=_slot("truth"),
                           story_key=_slot("story_keys"), answer_key=_slot("answer_keys"))  # fmt: skip
    texts = [m.get("content") if isinstance(m, dict) else None for m in host] if isinstance(host, list) else []
    rules = said("rules")
    if len(texts) != 10 or texts[3] != _slot("story_keys") or texts[5] != _slot("answer_keys") or texts[7] != rules:
        raise source.error(f"{cls}.hosting_instruction is not the 10-message primer this reader knows")
    known = source.rendered(f"{cls}.hosting_append_messages", known=_slot("known"), solver=_slot("solver"), branch=0)
    asked = source.rendered(f"{cls}.hosting_append_messages", known=_slot("known"), solver=_slot("solver"), branch=-1)
    try:
        instruction = asked[0]["content"].removeprefix(_slot("solver"))
        known_ack = known[1]["content"]
    except (TypeError, LookupError, AttributeError):
        raise source.error(f"{cls}.hosting_append_messages is not the shape this reader knows") from None
    own = PROMPTERS[language]
    prompter = replace(
        own,
        player_intro=_template(said("solver_instruction", story=_slot("story")), "story"),
        invalid_hint=said("solver_hint_invalid"),
        story_hint=said("solver_hint_appeared_in_story"),
        host_intro=_template(str(texts[0]), "story", "truth"),
        host_rules=rules,
        ack=str(texts[1]),
        ask_story_keys=str(texts[2]),
        ask_answer_keys=str(texts[4]),
        ask_rules=str(texts[6]),
        start=str(texts[8]),
        start_reply=_template(str(texts[9]), "story"),
        answer_instruction=instruction,
        known_ack=known_ack,
        restate_yes=lead("hosting_summary", "solver"),
        restate_no=lead("hosting_summary_opposite", "solver"),
        merge=lead("hosting_simplify", "reasoning"),
        compare=_template(said("hosting_compare", key1=_slot("key"), merge=_slot("merged")), "key", "merged"),
        invalid_phrases=_tested(source, f"{cls}.check_solver_valid", "in"),
        yes_prefixes=_tested(source, f"{cls}.check_yes", "startswith"),
        no_prefixes=_tested(source, f"{cls}.check_no", "startswith"),
    )
    if prompter not in _REGISTERED:
        _REGISTERED.append(prompter)
    return prompter


def known_prompters() -> list[Prompter]:
    """The project's prompters, then every prompter read from upstream's file in this process (what the mock judge
    recognises: a Chinese puzzle may be hosted in English wording, as v0.2 did)."""
    return [*PROMPTERS.values(), *_REGISTERED]
