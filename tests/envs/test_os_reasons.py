"""os: a reply without an ``Act:`` line gets the reason of os's taxonomy the parser found (what it had instead, with the
nearest match), so a model that writes ``Action: bash`` and one that answers in prose are two reasons, not one."""

from __future__ import annotations

import pytest

from agentbench_async.envs.os_interaction import reasons
from agentbench_async.envs.os_interaction.protocol import ParseError, parse_text


@pytest.mark.parametrize(
    ("reply", "status", "reason", "nearest"),
    [
        ("Think: look.\n\nAction: bash\n\n```bash\nls /root\n```", "invalid_format", reasons.ACT_SPELLING, "Action: bash"),
        ("**Act**: answer(3)", "invalid_format", reasons.ACT_SPELLING, "**Act**: answer(3)"),
        ("Let me look.\n```bash\nls /root\n```", "invalid_format", reasons.BASH_WITHOUT_ACT, "```bash\nls /root\n```"),
        ("The interval is 1 second.", "invalid_format", reasons.PROSE, "The interval is 1 second."),
        ("  \n", "invalid_format", reasons.EMPTY, None),
        # the two other parse errors keep their words (no nearest match needed: the Act: line is there)
        ("Act: answer 3", "invalid_format", "answer without parentheses: use Act: answer(<answer>)", None),
        ("Act: run it", "invalid_action", "the Act: line names no known action (bash, finish, answer)", None),
    ],
)
def test_a_reply_without_a_usable_act_line_names_what_it_had(reply: str, status: str, reason: str, nearest: str | None) -> None:
    parsed = parse_text(reply)
    assert isinstance(parsed, ParseError)
    assert (parsed.status, parsed.reason, parsed.nearest) == (status, reason, nearest)
    assert parsed.error == (f'{reason}; nearest: "{" ".join(nearest.split())}"' if nearest else reason)  # on one line


def test_a_valid_reply_still_parses_as_upstream() -> None:
    assert parse_text("Think: ok.\n\nAct: answer(3)").answer == "3"  # type: ignore[union-attr]
