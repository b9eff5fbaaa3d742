"""Why a webshop reply in text mode had no action: the reasons of webshop's taxonomy (docs/envs/webshop.md).

Upstream reads ``[Aa]ction: search[...]`` or ``click[...]``; a reply without one ends the episode (``invalid_format``,
AGENT_VALIDATION_FAILED). ``no_action_reason`` says what the reply had instead.
"""

from __future__ import annotations

import re

from ..reasons import EMPTY, PROSE, FailureReason, line_of, missing_action_reason

NOT_BRACKETED = "action not written as search[...] or click[...]"
TAG_SPELLING = 'action line not written as "Action: search[...]" or "Action: click[...]"'

LABELS = (EMPTY, NOT_BRACKETED, TAG_SPELLING, PROSE)

_TAG = re.compile(r"[Aa]ction:")
_TAG_LIKE = re.compile(r"^[ \t*#>_-]*(action|act)[ \t*_]*[:：-]", re.IGNORECASE | re.MULTILINE)


def no_action_reason(content: str) -> FailureReason:
    """The reason a reply without a usable action ended the episode: an ``Action:`` line whose action is not
    ``search[...]``/``click[...]`` (``Action: search for red shoes``), another spelling of the tag (``**Action**:``,
    ``ACTION:``), an empty reply, prose."""
    near = line_of(_TAG, content)
    if near is not None:
        return FailureReason(NOT_BRACKETED, near)
    return missing_action_reason(content, _TAG_LIKE, TAG_SPELLING)
