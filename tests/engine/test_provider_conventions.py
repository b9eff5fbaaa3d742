"""Provider conventions as the SDKs have them (models/families.py): OpenAI's reasoning models by name get
max_completion_tokens and no temperature on any host, a field left to the engine that a server refuses is adapted
once (recorded, said in the summary), a field the config sets wins; Anthropic's base URL works in the SDK's root
form and with /v1, direct and in batch mode; a 404 names the URL called and the form expected. Fixtures:
tests/fixtures/conventions/ (openai-python's ChatModel list, anthropic-sdk-python's base URL) and
tests/fixtures/providers/fatal_*_not_found.json."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web
from engine_support import mock_process, query, serve_app

from agentbench_async.cli import main
from agentbench_async.errors import ModelError
from agentbench_async.limits import ModelLimits
from agentbench_async.models import ModelConfig, batches, make_client
from agentbench_async.models.batches import BatchSettings
from agentbench_async.models.families import anthropic_api_root, is_openai_reasoning_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUN = ["run", "--task-header", "--env", "echo", "--split", "dev", "--no-progress"]


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def _run(capsys: pytest.CaptureFixture[str], out: Path, *args: str) -> tuple[int, str]:
    code = main([*RUN, "--out", str(out), *args])
    return code, capsys.readouterr().err


def _model_config(out: Path) -> dict:
    return json.loads(query(out, "SELECT config FROM runs ORDER BY created_at DESC LIMIT 1")[0][0])["models"][0]


def test_openai_reasoning_models_are_known_by_the_names_openai_lists():
    models = _fixture("conventions/openai_chat_models.json")
    assert [m for m in models["reasoning"] if not is_openai_reasoning_model(m)] == []
    assert [m for m in models["not_reasoning"] if is_openai_reasoning_model(m)] == []
    assert is_openai_reasoning_model("openai/gpt-5-mini") and is_openai_reasoning_model("O3-MINI")  # a gateway's names
    assert not is_openai_reasoning_model(models["reasoning_not_by_name"][0]), "left to the adaptation"


def test_anthropic_base_url_in_the_sdks_root_form_or_with_v1_reaches_the_same_endpoint():
    sdk = _fixture("conventions/anthropic_base_url.json")
    expected = sdk["default_base_url"] + sdk["messages_path"]
    for given in (sdk["default_base_url"], sdk["default_base_url"] + "/", sdk["default_base_url"] + "/v1"):
        assert anthropic_api_root(given) + "/messages" == expected
    assert anthropic_api_root("https://gateway.example/anthropic") == "https://gateway.example/anthropic/v1"


def test_gpt5_mini_behind_a_non_openai_host_with_openai_rules_just_works(capsys, tmp_path):
    out = tmp_path / "g.duckdb"
    with mock_process("--reasoning", "openai") as base_url:  # 127.0.0.1: not api.openai.com
        code, err = _run(capsys, out, "--model", "gpt-5-mini", "--base-url", base_url, "--limit", "4")
    assert code == 0, err
    assert query(out, "SELECT DISTINCT http_status FROM model_calls") == [(200,)], "right the first time: nothing refused"
    model = _model_config(out)
    assert model["max_tokens_param"] == "max_completion_tokens" and model["temperature"] is None and "adapted" not in model
    assert query(out, "SELECT count(*) FROM episodes WHERE status = 'completed'") == [(4,)]


def test_a_name_not_recognised_is_adapted_once_recorded_and_said(capsys, tmp_path):
    out = tmp_path / "a.duckdb"
    with mock_process("--reasoning", "openai") as base_url:
        code, err = _run(capsys, out, "--model", "company-gpt", "--base-url", base_url, "--limit", "6", "--max-concurrency", "2")
    assert code == 0, err
    said = [line for line in err.splitlines() if line.startswith("company-gpt: the server refused a request field")]
    assert len(said) == 1 and "max_completion_tokens instead of max_tokens, no temperature" in said[0], err
    assert _model_config(out)["adapted"] == ["max_completion_tokens instead of max_tokens", "no temperature (the server takes only its default)"]
    refused = query(out, "SELECT count(*) FROM model_calls WHERE http_status = 400 AND starts_with(note, 'adapted: ')")[0][0]
    assert 2 <= refused <= 4, "once per field, plus what was in flight when it switched"
    assert query(out, "SELECT count(*) FROM episodes WHERE status = 'completed'") == [(6,)]


@pytest.mark.parametrize(("setting", "fix"), [
    ({"temperature": 0}, "temperature: null"),
    ({"max_tokens_param": "max_tokens"}, "max_tokens_param: max_completion_tokens"),
])  # fmt: skip
def test_a_field_the_config_sets_always_wins(capsys, tmp_path, setting, fix):
    config = tmp_path / "m.yaml"
    config.write_text(yaml.safe_dump({"models": [{"name": "gpt-5-mini", **setting}]}), encoding="utf-8")
    out = tmp_path / "w.duckdb"
    with mock_process("--reasoning", "openai") as base_url:
        code, err = _run(capsys, out, "--config", str(config), "--base-url", base_url, "--limit", "3", "--max-concurrency", "1")
    assert code == 1 and fix in err, err
    assert query(out, "SELECT count(*) FROM model_calls") == [(1,)], "refused once, not adapted, the model stopped"


@dataclasses.dataclass
class _QuickBatches(BatchSettings):
    """Batch timing a config can set (``batch: {wait_s: ..., poll_s: ...}``), short: the mock processes a batch in 10 ms,
    and the defaults (first poll after 5 s, for the providers' minutes) made this test wait 40 s between turns."""

    wait_s: float = 0.05
    poll_s: float = 0.05
    poll_max_s: float = 0.2


@pytest.mark.parametrize("batch", [[], ["--batch", "3"]], ids=["direct", "batch"])
def test_anthropic_reached_with_the_sdks_root_url_and_with_v1(capsys, tmp_path, batch, monkeypatch):
    monkeypatch.setattr(batches, "BatchSettings", _QuickBatches)  # what `--batch 3` builds
    with mock_process("--batch-delay", "0.01") as base_url:
        for form, url in (("root", base_url.removesuffix("/v1")), ("v1", base_url)):
            out = tmp_path / f"{form}.duckdb"
            code, err = _run(capsys, out, "--model", "mock-oracle", "--provider", "anthropic", "--base-url", url, "--limit", "3", *batch)
            assert code == 0, (form, err)
            assert query(out, "SELECT count(*) FROM episodes WHERE status = 'completed' AND success") == [(3,)], form
            if batch:
                assert query(out, "SELECT count(*) FROM model_calls WHERE batch_id IS NULL") == [(0,)]


@pytest.mark.parametrize(("fixture", "provider", "path", "form"), [
    ("providers/fatal_anthropic_not_found.json", "anthropic", "/v1/messages", "the host root as Anthropic's SDK takes it"),
    ("providers/fatal_openai_model_not_found.json", "openai", "/chat/completions", "usually ending in /v1"),
])  # fmt: skip
async def test_a_404_names_the_url_called_and_the_form_expected(fixture, provider, path, form):
    fx = _fixture(fixture)

    async def not_found(request: web.Request) -> web.Response:
        return web.json_response(fx["body"], status=fx["status"])

    app = web.Application()
    app.router.add_post("/{tail:.*}", not_found)
    async with serve_app(app) as port:
        session = aiohttp.ClientSession()
        try:
            client = make_client(ModelConfig(name="m", provider=provider, base_url=f"http://127.0.0.1:{port}"), session, ModelLimits())
            with pytest.raises(ModelError) as info:
                await client.complete([{"role": "user", "content": "hi"}], None, calls=[], turn=1)
        finally:
            await session.close()
    message = str(info.value)
    assert f"(POST http://127.0.0.1:{port}{path})" in message and form in message and "\n" not in message, message
