"""Why an alfworld reply in text mode had no action: the reasons of alfworld's taxonomy (docs/envs/alfworld.md).

Upstream's ``process_action`` reads the first ``ACTION:`` (case-sensitive) and its line; a reply without one ends the
episode (AGENT_INVALID_ACTION upstream, ``invalid_format`` here). ``no_action_reason`` says what the reply had instead.
"""

from __future__ import annotations

import re

from ..reasons import EMPTY, PROSE, FailureReason, missing_action_reason

TAG_SPELLING = 'action line not written as "ACTION: <command>"'
EMPTY_ACTION = "empty action after 'ACTION:'"  # (the parser's own words, kept)

LABELS = (EMPTY, TAG_SPELLING, EMPTY_ACTION, PROSE)

_TAG_LIKE = re.compile(r"^[ \t*#>_-]*(action|act)[ \t*_]*[:：-]", re.IGNORECASE | re.MULTILINE)


def no_action_reason(content: str) -> FailureReason:
    """The reason a reply without ``ACTION:`` ended the episode (``Action: go to desk 1``, ``**ACTION**: ...``: the tag)."""
    return missing_action_reason(content, _TAG_LIKE, TAG_SPELLING)
