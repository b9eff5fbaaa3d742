"""A digest of what a run file holds, to show that a change of the code kept behaviour: the episodes' outcomes, every
turn, every model call and the run's stored config, without what differs between any two runs of the same code.

    agentbench demo --out before.duckdb      # before the change
    agentbench demo --out after.duckdb       # after it
    python tools/demo_digest.py before.duckdb after.duckdb

Left out or masked: ids, timestamps, latencies, the file's path, the mock server's port, the db sandbox's
per-episode MySQL user names (``abu_<hex>``) and the numbers in the os oracle's episodes (some os tasks write
``$RANDOM`` data that the oracle reads and answers). Rows are compared in content order (``ORDER BY ALL``).
Exit status 1 when two files' digests differ.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys

import duckdb

_EPISODE = ("model", "env", "split", "task_id", "repeat")
_E = ", ".join("e." + k for k in _EPISODE)
_QUERIES = {  # part -> (query, the positions of its text columns); model and env come first in each row
    "episodes": (f"""SELECT {', '.join(_EPISODE)}, status, score, success, n_turns, input_tokens, output_tokens, error,
                     details, source, action_mode, fingerprint, paper_status FROM episodes ORDER BY ALL""", (11, 12)),
    "turns": (f"""SELECT {_E}, t.turn, t.seq, t.role, t.content, t.action, t.observation, t.valid, t.error, t.tool_calls,
                  t.reasoning, t.injected FROM turns t JOIN episodes e USING (run_id, episode_id) ORDER BY ALL""", (8, 9, 10, 12)),
    "model_calls": (f"""SELECT {_E}, m.turn, m.attempt, m.http_status, m.input_tokens, m.output_tokens, m.error, m.caller,
                        m.model, m.finish_reason FROM model_calls m JOIN episodes e USING (run_id, episode_id)
                        ORDER BY ALL""", (11,)),
}  # fmt: skip


def _masked(row: tuple, texts: tuple[int, ...]) -> list:
    out = list(row)
    for i in texts:
        if isinstance(out[i], str):
            out[i] = re.sub(r"abu_[0-9a-f]{6,}", "abu_*", out[i])
            if out[1] == "os" and out[0] == "mock-oracle":
                out[i] = re.sub(r"\d+", "#", out[i])
    return out


def digest(path: str) -> dict[str, str]:
    """Part -> ``rows sha256[:16]`` of one run file (one run in it, as ``demo`` writes)."""
    out = {}
    with duckdb.connect(path, read_only=True) as con:
        for part, (query, texts) in _QUERIES.items():
            h, n = hashlib.sha256(), 0
            for row in con.execute(query).fetchall():
                h.update(json.dumps(_masked(row, texts), default=str).encode())
                n += 1
            out[part] = f"{n} {h.hexdigest()[:16]}"
        config = json.loads(con.execute("SELECT config FROM runs ORDER BY created_at LIMIT 1").fetchone()[0])
        config.pop("out", None)
        text = re.sub(r"http://127\.0\.0\.1:\d+", "http://127.0.0.1:PORT", json.dumps(config, sort_keys=True))
        out["runs.config"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__)
        return 2
    digests = [digest(p) for p in paths]
    for part in digests[0]:
        print(f"{part:12} " + "  ".join(d[part] for d in digests))
    return 0 if all(d == digests[0] for d in digests) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
