"""Why an os reply in text mode had no ``Act:`` line: the reasons of os's taxonomy (docs/envs/os.md).

Upstream's ``extract_action`` takes the last line starting ``Act: bash|finish|answer(...)``; a reply without any
``Act:`` ends the episode (AGENT_INVALID_ACTION upstream, ``invalid_format`` here). ``no_act_reason`` says what the
reply had instead, with the nearest match of what was expected where there is one.
"""

from __future__ import annotations

import re

from ..reasons import EMPTY, PROSE, FailureReason

# the labels (stable: runs compare by them); the two other parse errors keep their own words (protocol.py)
BASH_WITHOUT_ACT = 'bash block without an "Act: bash" line'
ACT_SPELLING = 'action line not written as "Act: <action>"'

LABELS = (EMPTY, BASH_WITHOUT_ACT, ACT_SPELLING, PROSE)

_ACT_LIKE = re.compile(r"^[ \t*#>_-]*(act|action)[ \t*_]*[:：]?[ \t*_]*(bash|finish|answer)\b.*$", re.IGNORECASE | re.MULTILINE)
_SHELL_BLOCK = re.compile(r"```[ \t]*(bash|sh|shell|console)?[ \t]*\n[\s\S]*?```", re.IGNORECASE)


def no_act_reason(content: str) -> FailureReason:
    """The reason a reply without an ``Act:`` line ended the episode."""
    if not content.strip():
        return FailureReason(EMPTY)
    spelled = _ACT_LIKE.search(content)
    if spelled is not None:
        return FailureReason(ACT_SPELLING, spelled.group(0).strip())
    block = _SHELL_BLOCK.search(content)
    if block is not None:
        return FailureReason(BASH_WITHOUT_ACT, block.group(0))
    return FailureReason(PROSE, content.strip().splitlines()[0])
