"""Progress for output that is not a terminal (issue 35): `run ... > log` (CI, nohup) gets a line every
--progress-every seconds (done/total, calls/s, retries, 429s, ETA) instead of nothing until the end; --no-progress
prints none. Through the CLI in its own process, its stderr a pipe, against the mock answering some calls 429."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from engine_support import mock_process, query

_LINE = re.compile(r"^progress: (\d+)/14 episodes \(\d+%\), [\d.]+ calls/s, (\d+) retries, (\d+) 429s, \d+ errors, ETA (\S+) \(\S+ elapsed\)$")


def _run(base_url: str, out: Path, limit: int, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentbench_async.cli", "run", "--model", "mock-oracle", "--base-url", base_url,
                           "--task-header", "--env", "echo", "--split", "dev", "--limit", str(limit), "--max-concurrency", "2",
                           "--out", str(out), *flags], capture_output=True, text=True, timeout=300)  # fmt: skip


def test_a_run_into_a_log_prints_a_progress_line_every_few_seconds(tmp_path):
    with mock_process("--latency-ms", "100", "--fault-rate", "0.3", "--faults", "429") as base_url:
        proc = _run(base_url, tmp_path / "lines.duckdb", 14, "--progress-every", "0.4")
        quiet = _run(base_url, tmp_path / "quiet.duckdb", 2, "--progress-every", "0.4", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("progress: ")]
    assert len(lines) >= 3, proc.stderr
    parsed = [_LINE.match(line) for line in lines]
    assert all(parsed), lines
    done = [int(m.group(1)) for m in parsed]
    assert done == sorted(done) and done[-1] < 14, "lines while the run goes, each no less done than the one before"
    assert max(int(m.group(3)) for m in parsed) > 0, "the 429s answered so far are counted"
    assert any(m.group(4) != "-" for m in parsed), "an ETA once episodes have finished"
    answered_429 = query(tmp_path / "lines.duckdb", "SELECT count(*) FROM model_calls WHERE http_status = 429")[0][0]
    assert max(int(m.group(3)) for m in parsed) <= answered_429
    assert quiet.returncode == 0 and "progress: " not in quiet.stderr
