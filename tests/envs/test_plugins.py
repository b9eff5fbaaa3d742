"""Environments from other packages (issue 31), as a user gets them: ``agentbench new-env`` writes a package, pip
installs it into a fresh virtualenv, and every command of that virtualenv finds it by its entry point.

The virtualenv sees this checkout's installed packages through a .pth file (so nothing is downloaded: pip
installs offline, with this environment's hatchling as the build backend); the plugins are installed into
the virtualenv alone. Beside the scaffolded one it holds a plugin that fails to import and one named like a
built-in environment.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from engine_support import mock_process, query
from support import require

from agentbench_async.errors import ConfigError
from agentbench_async.scaffold import new_env

NAME = "acme_desk"  # the scaffolded plugin
_BROKEN = {"name": "agentbench-broken-env", "module": "agentbench_broken_env", "entry": 'broken_env = "agentbench_broken_env:BrokenEnvironment"',
           "code": "import a_module_nobody_installed  # noqa: F401\n"}  # fmt: skip
_TWINS = [{"name": f"agentbench-twin-{x}", "module": f"agentbench_twin_{x}", "entry": f'twin = "agentbench_twin_{x}:Twin"',
           "code": "from agentbench_async.environment import Environment\n\n\nclass Twin(Environment):\n    name = 'twin'\n"}
          for x in ("a", "b")]  # two packages declaring one name  # fmt: skip
_SYNC = {"name": "agentbench-sync-env", "module": "agentbench_sync_env", "entry": 'sync_env = "agentbench_sync_env:SyncEnvironment"',
         "code": "from agentbench_async.environment import Environment, Outcome, Session, Step\n\n\nclass Limited(Session):\n"
                 "    async def begin(self):\n        return [{'role': 'user', 'content': 'hi'}]\n\n"
                 "    async def step(self, reply):\n        return Step(action='x')\n\n"
                 "    def on_turn_limit(self):  # sync: the engine awaits it (issue 43)\n        return Outcome('task_limit_exceeded')\n\n\n"
                 "class SyncEnvironment(Environment):\n    name = 'sync_env'\n    max_turns = 1\n\n"
                 "    def tasks(self, split):\n        yield from ()\n\n"
                 "    async def open_session(self, task, ctx):\n        return Limited()\n"}  # fmt: skip
_CLASH = {"name": "agentbench-clash-env", "module": "agentbench_clash_env", "entry": 'os = "agentbench_clash_env:ClashEnvironment"',
          "code": "from agentbench_async.environment import Environment\n\n\nclass ClashEnvironment(Environment):\n    name = 'os'\n"}  # fmt: skip


@dataclass
class _Venv:
    root: Path
    python: Path

    def cli(self, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "PYTHON"))}
        # a session of its own: on a timeout the command and all it started (--workers: a Ray instance) are ended
        proc = subprocess.Popen([str(self.python), "-m", "agentbench_async.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=cwd, env=env, start_new_session=True)  # fmt: skip
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def python_out(self, code: str) -> str:
        proc = subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout


def _package(root: Path, spec: dict[str, str]) -> Path:
    """A one-module package declaring one environment entry point."""
    (root / spec["module"]).mkdir(parents=True)
    (root / spec["module"] / "__init__.py").write_text(spec["code"])
    (root / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n[project]\nname = "{spec["name"]}"\n'
        f'version = "0.1.0"\n\n[project.entry-points."agentbench_async.environments"]\n{spec["entry"]}\n'
    )
    return root


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> _Venv:
    require(subprocess.run([sys.executable, "-c", "import hatchling"], capture_output=True).returncode == 0,
            "hatchling is not installed (pip install '.[test]')")  # fmt: skip
    root = tmp_path_factory.mktemp("plugins")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
    python = root / "venv" / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                               text=True, check=True).stdout.strip())  # fmt: skip
    (site / "_agentbench_host.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    made = _Venv(root, python)
    scaffold = made.cli("new-env", NAME, "--out", str(root / "acme"))
    assert scaffold.returncode == 0, scaffold.stderr
    packages = [str(root / "acme"), str(_package(root / "broken", _BROKEN)), str(_package(root / "clash", _CLASH)),
                str(_package(root / "sync", _SYNC)),
                *(str(_package(root / spec["module"], spec)) for spec in _TWINS)]  # fmt: skip
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation", *packages],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert pip.returncode == 0, pip.stderr
    return made


def test_the_scaffolds_own_tests_pass_once_installed(venv: _Venv) -> None:
    proc = subprocess.run([str(venv.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=venv.root / "acme",
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 passed" in proc.stdout


def test_envs_lists_the_plugin_and_gives_one_line_each_for_a_broken_one_and_a_clash(venv: _Venv) -> None:
    proc = venv.cli("envs")
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert f"{NAME}: answer a question about a pantry" in out and "(plugin from agentbench-env-acme-desk 0.1.0)" in out
    assert "os: " in out and "db: " in out  # the built-in ones are all still there
    assert "Traceback" not in proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.strip()]
    assert warnings == [
        "warning: environment plugin 'broken_env' from agentbench-broken-env 0.1.0 cannot be loaded (agentbench_broken_env:BrokenEnvironment): "
        "ModuleNotFoundError: No module named 'a_module_nobody_installed'",
        f"warning: environment plugin 'sync_env' from agentbench-sync-env 0.1.0: {_sync_line(venv)}: Limited.on_turn_limit must be async "
        "(async def on_turn_limit(...)): the engine awaits it",
        "warning: environment plugin 'os' from agentbench-clash-env 0.1.0 is refused: a built-in environment is named 'os'; rename the entry "
        "point in agentbench-clash-env 0.1.0's pyproject.toml",
        "warning: environment plugin 'twin' from agentbench-twin-a 0.1.0 is refused: agentbench-twin-b 0.1.0 declares 'twin' too; uninstall "
        "one of them or rename its entry point",
    ]
    assert "twin:" not in out


def _sync_line(venv: _Venv) -> str:
    """Where the sync plugin's on_turn_limit is defined, as the check names it: its installed file and line."""
    return venv.python_out("import agentbench_sync_env as m; print(m.__file__)").strip() + ":11"


def test_a_plugin_whose_session_has_a_sync_method_the_engine_awaits_is_one_line_with_file_and_line(venv: _Venv, tmp_path: Path) -> None:
    proc = venv.cli("run", "--env", "sync_env", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "s.duckdb"))
    assert proc.returncode == 2 and not (tmp_path / "s.duckdb").exists()
    assert proc.stderr.strip().splitlines() == [
        f"error: flags: envs: environment plugin 'sync_env' from agentbench-sync-env 0.1.0: {_sync_line(venv)}: Limited.on_turn_limit "
        "must be async (async def on_turn_limit(...)): the engine awaits it"
    ]


def test_a_broken_plugin_named_in_a_run_is_one_line_and_a_clash_leaves_the_built_in(venv: _Venv, tmp_path: Path) -> None:
    proc = venv.cli("run", "--env", "broken_env", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "b.duckdb"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: flags: envs: environment plugin 'broken_env' from agentbench-broken-env 0.1.0 cannot be loaded "
        "(agentbench_broken_env:BrokenEnvironment): ModuleNotFoundError: No module named 'a_module_nobody_installed'"
    ]
    picked = venv.python_out("from agentbench_async.envs import env_class; print(env_class('os').__module__)")
    assert picked.strip() == "agentbench_async.envs.os_interaction"


def test_the_plugins_options_are_checked_like_a_built_in_ones(venv: _Venv, tmp_path: Path) -> None:
    proc = venv.cli("run", "--env", NAME, "--env-option", f"{NAME}.colour=red", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                    "--out", str(tmp_path / "o.duckdb"))  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [f"error: {NAME}: unknown option 'colour' (valid: none)"]
    assert not (tmp_path / "o.duckdb").exists()


def test_all_is_the_built_in_environments_and_a_plugin_joins_when_named(venv: _Venv) -> None:
    code = ("import json; from agentbench_async.config import build_config\n"
            "print(json.dumps([build_config({'out': 'x.duckdb', 'models': ['m'], 'judge': 'j', 'envs': e}).envs for e in ('all', 'all,acme_desk', 'acme_desk')]))")  # fmt: skip
    every, with_plugin, alone = json.loads(venv.python_out(code))
    assert NAME not in every and "broken_env" not in every and "os" in every
    assert with_plugin == [*every, NAME]
    assert alone == [NAME]


def test_the_plugin_plays_a_task_file_of_the_users_own(venv: _Venv, tmp_path: Path) -> None:
    own = tmp_path / "mine.json"
    own.write_text(json.dumps([{"id": "m1", "question": "How many figs are there?", "shelves": {"figs": 2}, "answer": "2"}]))
    code = ("import json; from agentbench_async.config import build_config; from agentbench_async.envs import make_env\n"
            f"cfg = build_config({{'out': 'x.duckdb', 'models': ['m'], 'envs': '{NAME}', 'tasks': {{'{NAME}': {str(own)!r}}}}})\n"
            f"tasks = [(t.task_id, t.source) for t in make_env('{NAME}', options=cfg.env_options['{NAME}']).tasks('test')]\n"
            "print(json.dumps([tasks, cfg.public_dict()['agentbench_deviations']]))")  # fmt: skip
    tasks, deviations = json.loads(venv.python_out(code))
    assert tasks == [["m1", "custom"]]
    assert [d["setting"] for d in deviations] == [f"{NAME}.tasks"] and hashlib.sha256(own.read_bytes()).hexdigest() in deviations[0]["value"]


def test_demo_plays_the_plugins_policies_and_it_is_reported_viewed_and_resumed(venv: _Venv, tmp_path: Path) -> None:
    out = tmp_path / "demo.duckdb"
    first = venv.cli("demo", "--env", NAME, "--out", str(out), "--no-progress")
    assert first.returncode == 0, first.stderr
    assert "demo: 12 episodes finished, 0 already done" in first.stderr
    scores = dict(query(out, "SELECT model, round(100 * avg(score)) FROM episodes WHERE env = 'acme_desk' GROUP BY model"))
    assert scores["mock-oracle"] == 100 and scores["mock-weak"] < 100, scores
    statuses = {s for (s,) in query(out, "SELECT DISTINCT status FROM episodes WHERE model = 'mock-weak'")}
    assert statuses == {"completed", "invalid_format"}
    report = venv.cli("report", str(out), "--json")
    assert report.returncode == 0, report.stderr
    assert NAME in report.stdout
    site = tmp_path / "site"
    view = venv.cli("view", str(out), "--export", str(site))
    assert view.returncode == 0, view.stderr
    episode = query(out, "SELECT episode_id FROM episodes WHERE model = 'mock-oracle' ORDER BY task_id LIMIT 1")[0][0]
    pages = "".join(p.read_text(errors="replace") for p in site.rglob("*.html") if episode in p.read_text(errors="replace"))
    assert "Action: look apples" in pages  # the oracle's first reply of dev-1, in its transcript
    again = venv.cli("demo", "--env", NAME, "--out", str(out), "--no-progress")
    assert again.returncode == 0, again.stderr
    assert "demo: 0 episodes finished, 12 already done" in again.stderr


def test_an_edited_plugin_is_played_again_by_demo_which_says_why(venv: _Venv, tmp_path: Path) -> None:
    out = tmp_path / "edit.duckdb"
    first = venv.cli("demo", "--env", NAME, "--out", str(out), "--no-progress")
    assert first.returncode == 0, first.stderr
    code = query(out, f"SELECT DISTINCT json_extract_string(config, '$.env_options.{NAME}.code') FROM runs")[0][0]
    assert code.startswith("sha256:") and code.endswith(" (agentbench-env-acme-desk 0.1.0)"), code  # its sources, its distribution
    session = Path(venv.python_out(f"import agentbench_env_{NAME}.session as m; print(m.__file__)").strip())
    session.write_text(session.read_text() + "\n# edited: the code a run resumes against changed\n")
    again = venv.cli("demo", "--env", NAME, "--out", str(out), "--no-progress")
    err = " ".join(again.stderr.split())
    assert again.returncode == 0, err
    assert f"demo: {NAME}.code: {code[:20]}" in err and "in the file, sha256:" in err and "playing again" in err, err
    assert "demo: 12 episodes finished, 0 already done" in err


@pytest.fixture
def venv_mock(venv: _Venv) -> Iterator[str]:
    """``serve-mock`` of the virtualenv (it finds the plugin's policies the way the run does)."""
    with mock_process(python=str(venv.python)) as base_url:
        yield base_url


def test_two_workers_run_the_plugin_against_serve_mock(venv: _Venv, venv_mock: str, tmp_path: Path) -> None:
    require(subprocess.run([str(venv.python), "-c", "import ray"], capture_output=True).returncode == 0, "Ray is not installed (pip install '.[ray]')")
    out = tmp_path / "w.duckdb"
    models = [{"name": f"mock-{p}", "base_url": venv_mock, "task_header": True} for p in ("oracle", "weak")]
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"out": str(out), "envs": NAME, "split": "test", "models": models}))
    proc = venv.cli("run", "--config", str(tmp_path / "run.yaml"), "--workers", "2", "--no-progress", timeout=600)
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 0, err
    assert "ray: 2 workers on 1 node;" in err
    rows = dict(query(out, "SELECT model, count(*) FILTER (WHERE success) FROM episodes GROUP BY model"))
    assert rows == {"mock-oracle": 6, "mock-weak": rows["mock-weak"]} and rows["mock-weak"] < 6, rows


def test_new_env_refuses_a_bad_name_a_built_in_name_and_a_used_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^new-env: 'Acme-Desk' is not a valid environment name; use lowercase"):
        new_env("Acme-Desk", tmp_path / "a")
    with pytest.raises(ConfigError, match=r"^new-env: 'kg' is a built-in environment's name; choose another$"):
        new_env("kg", tmp_path / "b")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"exists and is not an empty directory"):
        new_env("acme", tmp_path / "used")
    assert (tmp_path / "used" / "notes.txt").read_text() == "mine" and not (tmp_path / "a").exists()
