"""Reading AgentBench's prompt strings out of the upstream source files (envs/upstream_prompts.py)."""

from __future__ import annotations

import pytest

from agentbench_async.errors import TaskFileError
from agentbench_async.envs.upstream_prompts import FC, V02, upstream_config, upstream_path, upstream_source

ALFWORLD = "src/server/tasks/alfworld/task.py"
WEBSHOP = "src/server/tasks/webshop/__init__.py"


def test_reads_a_function_return_and_the_literal_messages_of_inject_calls(official_data_dir):
    source = upstream_source(official_data_dir, V02, ALFWORLD, env="alfworld")
    instruction = source.returned("ALFWorld.get_task_instruction")
    # the live return, not the commented-out older one above it
    assert instruction.startswith("Interact with a household to solve a task.") and "\n Reminder: \n1. " in instruction
    assert instruction.endswith("\n\n")
    injected = source.call_arguments("ALFWorld.alfworld_run", "inject")
    assert [m["role"] for m in injected] == ["user", "agent", "user", "user"]
    assert injected[0]["content"] is None and injected[1]["content"].startswith("OK. ")  # computed vs literal content


def test_reads_a_module_constant_with_line_continuations_joined(official_data_dir):
    source = upstream_source(official_data_dir, V02, WEBSHOP, env="webshop")
    prompt = source.literal("prompt")
    assert prompt.startswith("\nYou are web shopping.\n") and "available actions, you have to respond" in prompt
    shown = source.call_arguments("WebShop.start_sample", "inject")
    assert len(shown) == 11 and [m["role"] for m in shown[:10]] == ["user", "agent"] * 5
    assert "l'eau d'issey" in shown[2]["content"]


def test_reads_assignments_inside_a_method_and_task_configs(official_data_dir):
    source = upstream_source(official_data_dir, V02, "src/server/tasks/card_game/AI/AI_En.py", env="card_game")
    assert source.literal("self.action_type", within="Agent.__init__") == {"normal": 0, "active": 1}
    config = upstream_config(official_data_dir, FC, "alfworld", env="alfworld")
    assert config["default"]["parameters"]["max_step"] == 20


def test_a_missing_file_is_one_line_naming_it_and_data_pull(tmp_path):
    with pytest.raises(TaskFileError) as info:
        upstream_source(tmp_path, V02, ALFWORLD, env="alfworld")
    message = str(info.value)
    assert "\n" not in message and message.startswith("alfworld: ")
    assert str(upstream_path(tmp_path, V02, ALFWORLD)) in message and f"agentbench data pull --dest {tmp_path}" in message
    with pytest.raises(TaskFileError, match=r"webshop\.yaml not found"):
        upstream_config(tmp_path, FC, "webshop", env="webshop")


def test_nothing_in_the_file_is_executed_and_computed_values_are_refused(tmp_path):
    marker = tmp_path / "ran"
    path = upstream_path(tmp_path, V02, WEBSHOP)
    path.parent.mkdir(parents=True)
    path.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\nprompt = 'hello ' 'world'\n"
                    "computed = ''.join(['a'])\n")  # fmt: skip
    source = upstream_source(tmp_path, V02, WEBSHOP, env="webshop")
    assert source.literal("prompt") == "hello world"
    assert not marker.exists()
    with pytest.raises(TaskFileError, match="'computed' is not assigned a literal value"):
        source.literal("computed")
    with pytest.raises(TaskFileError, match="no class 'WebShop'"):
        source.call_arguments("WebShop.start_sample", "inject")


def test_a_file_that_is_not_python_is_one_line(tmp_path):
    path = upstream_path(tmp_path, V02, ALFWORLD)
    path.parent.mkdir(parents=True)
    path.write_text("<html>404: Not Found</html>\n")
    with pytest.raises(TaskFileError, match="not Python source this reader can parse"):
        upstream_source(tmp_path, V02, ALFWORLD, env="alfworld")
