"""Keys, URLs and Anthropic's request conventions as the SDKs have them (issue 35): OPENAI_API_KEY/OPENAI_BASE_URL and ANTHROPIC_API_KEY/
ANTHROPIC_BASE_URL are the defaults when the config names none, a named variable wins, Azure OpenAI in the
SDK's AzureOpenAI form, and every key/variable check before the result file exists. Each through the CLI against a
loopback server that logs what it received. Fixture: tests/fixtures/conventions/sdk_environment.json (read from
openai-python 3.3.1 and anthropic-sdk-python 0.121.0) and anthropic_sdk.json (anthropic-sdk-python 0.121.0)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web
from engine_support import app_in_thread, query

from agentbench_async.cli import main
from agentbench_async.mock.server import MockModelServer, MockOptions

ANTHROPIC = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "conventions" / "anthropic_sdk.json").read_text(encoding="utf-8"))
SDK = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "conventions" / "sdk_environment.json").read_text(encoding="utf-8"))
RUN = ["run", "--task-header", "--env", "echo", "--split", "dev", "--no-progress", "--limit", "2"]
KEY = "sk-test-0123456789abcdef"  # a key-shaped value: it must reach the server and nowhere else


@pytest.fixture(autouse=True)
def _no_sdk_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for provider in ("openai", "anthropic", "azure"):
        for name, value in SDK[provider].items():
            if name.endswith("_variable"):
                monkeypatch.delenv(value, raising=False)


class _Logged:
    """The mock model, logging each request's path, query and headers; also at Azure's deployment path."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.bodies: list[dict] = []
        self.port = 0

    def _app(self) -> web.Application:
        server = MockModelServer(MockOptions(policy="oracle"))
        app = server.app()

        @web.middleware
        async def log(request: web.Request, handler):  # type: ignore[no-untyped-def]
            self.requests.append((request.path, request.query_string, dict(request.headers)))
            self.bodies.append(await request.json())  # (aiohttp keeps the body for the handler)
            return await handler(request)

        app.middlewares.append(log)
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", server._openai)
        return app

    @contextlib.contextmanager
    def serving(self) -> Iterator[_Logged]:
        with app_in_thread(self._app) as self.port:
            yield self

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _run(capsys: pytest.CaptureFixture[str], out: Path, *args: str) -> tuple[int, str]:
    code = main([*RUN, "--out", str(out), *args])
    return code, capsys.readouterr().err


def _stored_model(out: Path) -> dict:
    return json.loads(query(out, "SELECT config FROM runs")[0][0])["models"][0]


def _key_nowhere_in(out: Path, err: str) -> None:
    assert KEY not in err
    assert KEY.encode() not in out.read_bytes(), "the key is never stored"


def test_openai_key_and_base_url_from_the_sdks_variables(capsys, tmp_path, monkeypatch):
    sdk = SDK["openai"]
    out = tmp_path / "o.duckdb"
    with _Logged().serving() as server:
        monkeypatch.setenv(sdk["key_variable"], KEY)
        monkeypatch.setenv(sdk["base_url_variable"], server.root + "/v1")
        code, err = _run(capsys, out, "--model", "mock-oracle")  # no --api-key-env, no --base-url
    assert code == 0, err
    name, value = sdk["auth_header"]
    assert server.requests and {r[0] for r in server.requests} == {"/v1" + sdk["chat_path"]}
    assert all(r[2].get(name) == value.format(api_key=KEY) for r in server.requests)
    assert _stored_model(out)["api_key_env"] == sdk["key_variable"]
    assert query(out, "SELECT count(*) FROM episodes WHERE status = 'completed'") == [(2,)]
    _key_nowhere_in(out, err)


def test_a_named_key_variable_and_a_given_base_url_win_over_the_sdks_variables(capsys, tmp_path, monkeypatch):
    out = tmp_path / "n.duckdb"
    with _Logged().serving() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-the-default-one-not-this")
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
        monkeypatch.setenv("MY_GATEWAY_KEY", KEY)
        code, err = _run(capsys, out, "--model", "mock-oracle", "--api-key-env", "MY_GATEWAY_KEY", "--base-url", server.root + "/v1")
    assert code == 0, err
    assert {r[2].get("Authorization") for r in server.requests} == {f"Bearer {KEY}"}
    assert _stored_model(out)["api_key_env"] == "MY_GATEWAY_KEY"


def test_anthropic_key_and_base_url_from_the_sdks_variables(capsys, tmp_path, monkeypatch):
    sdk = SDK["anthropic"]
    out = tmp_path / "a.duckdb"
    with _Logged().serving() as server:
        monkeypatch.setenv(sdk["key_variable"], KEY)
        monkeypatch.setenv(sdk["base_url_variable"], server.root)  # the SDK's form: the host root
        code, err = _run(capsys, out, "--model", "mock-oracle", "--provider", "anthropic")
    assert code == 0, err
    name, value = sdk["auth_header"]
    assert {r[0] for r in server.requests} == {sdk["messages_path"]}
    headers = {k.lower(): v for k, v in server.requests[0][2].items()}
    assert headers[name.lower()] == value.format(api_key=KEY) and "authorization" not in headers
    _key_nowhere_in(out, err)


def test_azure_openai_in_the_sdks_form(capsys, tmp_path, monkeypatch):
    sdk = SDK["azure"]
    out = tmp_path / "z.duckdb"
    with _Logged().serving() as server:
        monkeypatch.setenv(sdk["key_variable"], KEY)
        monkeypatch.setenv(sdk["endpoint_variable"], server.root)
        monkeypatch.setenv(sdk["api_version_variable"], "2024-10-21")
        code, err = _run(capsys, out, "--model", "mock-oracle", "--provider", "azure")
    assert code == 0, err
    expected_path = (sdk["base_url_from_endpoint"].format(azure_endpoint="") + sdk["deployments_prefix"].format(model="mock-oracle")
                     + sdk["chat_path"])  # fmt: skip
    assert {(r[0], r[1]) for r in server.requests} == {(expected_path, "api-version=2024-10-21")}
    name, value = sdk["auth_header"]
    headers = {k.lower(): v for k, v in server.requests[0][2].items()}
    assert headers[name] == value.format(api_key=KEY) and "authorization" not in headers
    body_field = _stored_model(out)
    assert body_field["provider"] == "azure" and body_field["api_version"] == "2024-10-21"
    _key_nowhere_in(out, err)


def test_a_base_url_with_a_query_keeps_it_after_the_path(capsys, tmp_path):
    out = tmp_path / "q.duckdb"
    with _Logged().serving() as server:
        code, err = _run(capsys, out, "--model", "mock-oracle", "--base-url", server.root + "/v1?api-version=2024-10-21")
    assert code == 0, err
    assert {(r[0], r[1]) for r in server.requests} == {("/v1/chat/completions", "api-version=2024-10-21")}


@pytest.mark.parametrize(("args", "env", "says"), [
    (["--api-key-env", "NOT_EXPORTED_KEY"], {}, "environment variable NOT_EXPORTED_KEY is not set"),
    (["--judge-model", "mock-judge", "--judge-api-key-env", "NO_JUDGE_KEY", "--base-url", "http://127.0.0.1:9/v1"], {},
     "judge (mock-judge): environment variable NO_JUDGE_KEY is not set"),
    ([], {}, "api.openai.com needs an API key: export OPENAI_API_KEY"),
    (["--provider", "anthropic"], {}, "api.anthropic.com needs an API key: export ANTHROPIC_API_KEY"),
    (["--provider", "azure"], {"AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com", "AZURE_OPENAI_API_KEY": KEY},
     "api_version: no API version: set api_version (e.g. 2024-10-21) or export OPENAI_API_VERSION"),
    (["--provider", "azure"], {"OPENAI_API_VERSION": "2024-10-21", "AZURE_OPENAI_API_KEY": KEY},
     "base_url: no Azure endpoint: set base_url (https://RESOURCE.openai.azure.com) or export AZURE_OPENAI_ENDPOINT"),
    (["--provider", "azure", "--base-url", "https://r.openai.azure.com"], {"OPENAI_API_VERSION": "2024-10-21"},
     "api_key_env: no key: export AZURE_OPENAI_API_KEY"),
    ([], {"OPENAI_BASE_URL": "localhost:8000/v1"}, "$OPENAI_BASE_URL is 'localhost:8000/v1', not an http(s) URL"),
])  # fmt: skip
def test_every_key_and_variable_is_checked_before_the_result_file_exists(capsys, tmp_path, monkeypatch, args, env, says):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "never.duckdb"
    code, err = _run(capsys, out, "--model", "gpt-4o", *args)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], err
    assert not out.exists() and list(tmp_path.iterdir()) == [], "nothing is left behind"


def _anthropic_run(capsys: pytest.CaptureFixture[str], tmp_path: Path, server: _Logged, name: str, *args: str, model: dict | None = None) -> tuple[int, str, Path]:
    out = tmp_path / f"{name}.duckdb"
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump({"models": [{"name": "mock-oracle", "provider": "anthropic", "base_url": server.root,
                                                  "task_header": True, **(model or {})}]}), encoding="utf-8")  # fmt: skip
    code = main([*RUN, "--config", str(config), "--out", str(out), *args])
    return code, capsys.readouterr().err, out


def test_anthropic_sends_no_sampling_parameter_unless_set_and_the_sdks_version(capsys, tmp_path):
    with _Logged().serving() as server:
        code, err, out = _anthropic_run(capsys, tmp_path, server, "plain")
        assert code == 0, err
        sent = list(server.bodies)
        code, err, _ = _anthropic_run(capsys, tmp_path, server, "warm", "--temperature", "0.5")
        assert code == 0, err
    for name in ANTHROPIC["sampling_params_omitted_by_default"]:
        assert all(name not in body for body in sent), f"{name} sent though not set"
    assert {b.get("temperature") for b in server.bodies[len(sent):]} == {0.5}, "set: sent"
    assert {r[2].get("anthropic-version") for r in server.requests} == {ANTHROPIC["anthropic_version_header"]}
    model = _stored_model(out)
    assert model["temperature"] is None
    assert (model["timeout"], model.get("anthropic_version")) == (ANTHROPIC["default_timeout"]["total_s"], ANTHROPIC["anthropic_version_header"])


def test_the_anthropic_version_is_configurable(capsys, tmp_path):
    with _Logged().serving() as server:
        code, err, _ = _anthropic_run(capsys, tmp_path, server, "v", model={"anthropic_version": "2099-01-01"})
    assert code == 0, err
    assert {r[2].get("anthropic-version") for r in server.requests} == {"2099-01-01"}


@pytest.mark.parametrize("thinking", ANTHROPIC["thinking_configs"])
def test_every_thinking_config_of_the_sdk_is_accepted_and_sent(capsys, tmp_path, thinking):
    with _Logged().serving() as server:
        code, err, _ = _anthropic_run(capsys, tmp_path, server, "t", "--max-tokens", "4096", model={"thinking": thinking})
    assert code == 0, err
    assert all(body["thinking"] == thinking and "temperature" not in body for body in server.bodies)


def test_a_thinking_display_the_sdk_does_not_have_is_one_line(capsys, tmp_path):
    with _Logged().serving() as server:
        code, err, out = _anthropic_run(capsys, tmp_path, server, "bad", model={"thinking": {"type": "adaptive", "display": "full"}})
    assert code == 2 and not server.requests and not out.exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "thinking.display: expected one of summarized, omitted, got 'full'" in lines[0], err


async def test_an_attempts_timeout_is_the_sdks_ten_minutes_connecting_at_most_five_seconds():
    from agentbench_async.config import model_from_dict
    from agentbench_async.models import ModelLimits, make_client

    config = model_from_dict({"name": "m", "base_url": "http://127.0.0.1:9/v1"}, "test")
    async with aiohttp.ClientSession() as session:
        client = make_client(config, session, ModelLimits())
        expected = ANTHROPIC["default_timeout"]
        assert (client._timeout.total, client._timeout.sock_connect) == (expected["total_s"], expected["connect_s"])


def test_the_output_budgets_the_sdk_streams_are_streamed_and_assembled(capsys, tmp_path):
    with _Logged().serving() as server:
        code, err, out = _anthropic_run(capsys, tmp_path, server, "long", "--max-tokens", "32000")
        assert code == 0, err
        streamed = list(server.bodies)
        code, err, _ = _anthropic_run(capsys, tmp_path, server, "short", "--max-tokens", "21333")
        assert code == 0, err
    assert streamed and all(b.get("stream") is True for b in streamed)
    assert all("stream" not in b for b in server.bodies[len(streamed):]), "21,333 tokens fit the SDK's 10 minutes: not streamed"
    rows = query(out, "SELECT count(*), min(output_tokens), max(http_status) FROM model_calls")[0]
    assert rows[0] == len(streamed) and rows[1] > 0 and rows[2] == 200
    assert query(out, "SELECT DISTINCT status FROM episodes") == [("completed",)]


def test_a_streamed_message_adds_up_to_the_message_and_a_broken_stream_is_refused():
    from agentbench_async.models.streaming import assemble, needs_streaming, stream_of

    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "stop_reason": "tool_use", "stop_sequence": None,
               "content": [{"type": "thinking", "thinking": "let me see", "signature": "sig"}, {"type": "text", "text": "Checking the file."},
                           {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"script": "ls -l"}}],
               "usage": {"input_tokens": 12, "output_tokens": 34}}  # fmt: skip
    raw = stream_of(message)
    assert assemble(raw) == message
    for broken in (raw[: raw.index(b"event: message_stop")], raw + b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error"}}\n\n'):
        with pytest.raises(ValueError):
            assemble(broken)
    assert not needs_streaming("claude-sonnet-4-5", 21_333) and needs_streaming("claude-sonnet-4-5", 21_334)
    assert needs_streaming("claude-opus-4-0", 8_193) and not needs_streaming("claude-opus-4-0", 8_192)
