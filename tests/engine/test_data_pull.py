"""``agentbench data pull`` against a loopback server that serves the official files by commit and path."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest
from aiohttp import web

from agentbench_async.config import build_config
from agentbench_async.data_pull import DataPullError, manifest, pull
from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext
from agentbench_async.envs.card_game.protocol import ACK
from agentbench_async.envs.card_game.wording import upstream_wording
from agentbench_async.settings import deviations


@pytest.fixture
async def mirror(official_data_dir):
    """Serves /<commit>/<repo_path> from the local copy; records requests; can corrupt one file."""
    by_url = {f"/{f['commit']}/{f['repo_path']}": official_data_dir / f["path"] for f in manifest()}
    state = {"requests": 0, "corrupt": None}

    async def handler(request: web.Request) -> web.StreamResponse:
        state["requests"] += 1
        path = by_url.get(request.path)
        if path is None:
            return web.Response(status=404)
        body = path.read_bytes()
        if state["corrupt"] and request.path.endswith(state["corrupt"]):
            body = body[:-1] + b"!"
        return web.Response(body=body)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", state
    await runner.cleanup()


def test_manifest_matches_the_official_files(official_data_dir):
    files = manifest()
    assert len(files) == 97  # 61 data files + 36 upstream prompt sources and task configs (FC's task code for db, kg, webshop, alfworld)
    for f in files:
        assert hashlib.sha256((official_data_dir / f["path"]).read_bytes()).hexdigest() == f["sha256"], f["path"]


async def test_pull_downloads_verifies_and_skips_present_files(tmp_path, mirror, official_data_dir):
    base, state = mirror
    n = await pull(tmp_path / "data", base_url=base)
    assert n == 97 and state["requests"] == 97
    assert (tmp_path / "data/dbbench/standard.jsonl").read_bytes() == (official_data_dir / "dbbench/standard.jsonl").read_bytes()
    await pull(tmp_path / "data", base_url=base)
    assert state["requests"] == 97, "files already present with the right hash are not downloaded again"


async def test_pull_refuses_a_file_whose_hash_does_not_match(tmp_path, mirror):
    base, state = mirror
    state["corrupt"] = "dbbench/dev.jsonl"
    with pytest.raises(DataPullError, match="dbbench/dev.jsonl: sha256 .* does not match"):
        await pull(tmp_path / "data", base_url=base)
    assert not (tmp_path / "data/dbbench/dev.jsonl").exists()


def test_cli_data_pull_unreachable_server_is_a_one_line_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "data", "pull", "--dest", str(tmp_path / "d"),
                           "--base-url", "http://127.0.0.1:9/none"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "download failed after retries" in proc.stderr


async def test_a_pulled_data_dir_plays_card_game_with_upstreams_acknowledgement(tmp_path, mirror):
    """AI/client.py is pulled and pinned like the other prompt files: card_game then sends upstream's
    acknowledgement after the rules and the run records no deviation (before: the project's own line, and
    card_game.acknowledgement beside the score)."""
    base, _ = mirror
    data = tmp_path / "data"
    await pull(data, base_url=base)
    client = data / "upstream-prompts/v0.2/src/server/tasks/card_game/AI/client.py"
    assert client.is_file()
    raw = {"out": str(tmp_path / "x.duckdb"), "models": ["m"], "envs": ["card_game"], "data_dir": str(data)}
    # only the opponents remain (upstream's C++ baselines drew from the clock: never reproducible)
    assert [d.setting for d in deviations(build_config(raw, where="test").public_dict())] == ["card_game.opponents"]
    env = make_env("card_game", data_dir=data)
    await env.start()
    task = next(iter(env.tasks("test")))
    session = await env.open_session(task, EpisodeContext(episode_id=task.task_id))
    messages = await session.begin()
    ack = [m["content"] for m in messages if m["role"] == "assistant"]
    assert ack and ack[0] != ACK and f'(system, "{ack[0]}")' in client.read_text()  # upstream's, verbatim
    assert ack[0] == upstream_wording(data).ack and upstream_wording(data).source == "upstream"
