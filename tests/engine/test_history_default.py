"""AgentBench's history truncation is the default policy, and it stays valid in tools mode."""

from __future__ import annotations

import random
import string

from agentbench_async.config import RunConfig
from agentbench_async.history import AGENTBENCH_SEGMENT_BUDGET, count_segments, history_policy
from agentbench_async.types import Message


def test_agentbench_truncation_is_the_default() -> None:
    assert RunConfig.__dataclass_fields__["history"].default == "agentbench"


def test_tools_mode_tail_never_starts_with_an_orphan_tool_result() -> None:
    big = "word " * (AGENTBENCH_SEGMENT_BUDGET - 5)  # one segment per word: this alone nearly fills the budget
    messages: list[Message] = [{"role": "user", "content": "instructions"}]
    for i in range(4):
        messages.append({"role": "assistant", "content": big if i == 2 else "", "tool_calls": [{"id": f"c{i}",
                         "type": "function", "function": {"name": "execute_sql", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "[(1,)]"})
    shaped = history_policy("agentbench")(messages)
    # the long message with call c2 no longer fits: it is dropped, and so is the result of c2 that follows it
    assert shaped[0]["content"].startswith("instructions") and "messages are omitted" in shaped[0]["content"]
    assert shaped[1]["role"] == "assistant" and shaped[1]["tool_calls"][0]["id"] == "c3"
    call_ids = {c["id"] for m in shaped if m.get("tool_calls") for c in m["tool_calls"]}
    assert all(m["tool_call_id"] in call_ids for m in shaped if m["role"] == "tool")


def _segments_char_by_char(text: str) -> int:
    """AgentBench's rule spelled out one character at a time (the reference for the fast count)."""
    segments = run = 0
    for char in text:
        if char.isalpha():
            run += 1
            if run == 7:
                segments, run = segments + 1, 0
        else:
            segments, run = segments + (1 if run else 0), 0
            segments += char not in (" ", "\n")
    return segments + (1 if run else 0)


def test_segment_count_matches_the_rule_on_any_text() -> None:
    rng = random.Random(7)
    alphabets = [string.ascii_letters, string.printable, " \n\tab.", string.ascii_letters + "éßΩ中 \n1_", "ａｂ٣①½ "]
    for alphabet in alphabets:
        for _ in range(300):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))
            assert count_segments(text) == _segments_char_by_char(text), text
            assert count_segments(text) == _segments_char_by_char(text), text  # the count remembered is the same
    long_texts = ["word, " * 3000, "wörd, " * 3000]  # longer than the texts whose counts are remembered
    for text in long_texts:
        assert count_segments(text) == count_segments(text) == _segments_char_by_char(text) == 6000


def test_short_conversations_are_sent_whole_and_long_ones_cut_at_the_budget() -> None:
    shape = history_policy("agentbench")
    short: list[Message] = [{"role": "user", "content": "instructions"}, {"role": "assistant", "content": "a" * 100},
                            {"role": "user", "content": "obs"}]  # fmt: skip
    assert shape(short) == short  # the first message only copied; the tail starts with the model's turn
    # just at the budget in characters but below it in segments (7 letters a segment): nothing is dropped
    letters: list[Message] = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "a" * AGENTBENCH_SEGMENT_BUDGET}]
    assert shape(letters) == letters
    # at the budget in segments: the long message goes and the first message says so
    punctuation: list[Message] = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "." * AGENTBENCH_SEGMENT_BUDGET}]
    assert shape(punctuation) == [{"role": "user", "content": "x\n\n[NOTICE] 1 messages are omitted."}]
