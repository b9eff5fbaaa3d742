"""os: grades by construction — the fifth round: the metadata of the tools is the task's state.

Round 4 showed a check the pristine image's tool folders over the episode's, so official ``std-006-new-00003`` ("a
SUID vulnerability: find it and fix it"; init ``chmod u+s /usr/bin/find``, check ``ls -l /usr/bin/find | awk ...``)
scored 1.0 with nothing done: the check saw the image's find, without the bit. Now a file of a tool folder that the
episode changed is shown to the check as the episode's wherever its bytes are the image's (a read-only copy made for
the check, with the episode's mode, owner, times and extended attributes), and the image's only where the bytes
differ or the file is gone. The attacks on that: a tool made unrunnable (``chmod a-x``, a same-bytes copy owned by
someone else, an access list) so that a check reading its output sees nothing; set-id bits on a tool; the episode's
copy of a tool rewritten *during* a check by the model's own code (through a hard link, or through a frozen process's
``/proc/PID/root``). Each runs end to end through ``agentbench run`` and must score 0 ``completed`` (never
``env_error``), beside the honest answers scoring 1.
"""

from __future__ import annotations

import json
from pathlib import Path

from agentbench_async.envs.os_interaction import OSEnvironment
from agentbench_async.envs.os_interaction.grading import grade
from engine_support import app_in_thread

from test_os_grading_round4 import _hostile_model, _run
from test_os_sandbox import _Episode, os_root, sandboxed  # noqa: F401  (fixtures)

_SUID = "std-006-new-00003"
# the model's own script a check runs (as a `calc` task's check runs the model's calc): it rewrites the episode's
# /usr/bin/ls (the image's bytes, touched: shown to the check) into one that prints find without its set-uid bit
_FAKE_LS = ("printf '#!/bin/sh\\necho \"-rwxr-xr-x 1 root root 1 Jan 1 2023 /usr/bin/find\"\\n' > /tmp/fake; "
            "touch /usr/bin/ls; printf '#!/bin/sh\\n%s\\n' \"$1\" > /root/fix.sh; chmod +x /root/fix.sh")  # fmt: skip
_THROUGH_LINK = "ln /usr/bin/ls /tmp/ls-link; set -- 'cat /tmp/fake > /tmp/ls-link'; " + _FAKE_LS
_THROUGH_PROC = ("(setsid sleep 1000 </dev/null >/dev/null 2>&1 &); "
                 "set -- 'for p in /proc/[0-9]*; do cat /tmp/fake > $p/root/usr/bin/ls 2>/dev/null && break; done'; " + _FAKE_LS)  # fmt: skip
# a same-bytes ls that root may run but others may not: user 65534 denied by an access list
_ACL = ("python3 -c \"import os, struct; a = struct.pack('<I', 2) + b''.join(struct.pack('<HHI', t, p, i) for t, p, i in "
        "((1, 7, 0xffffffff), (2, 0, 65534), (4, 5, 0xffffffff), (16, 5, 0xffffffff), (32, 5, 0xffffffff))); "
        "os.setxattr('/usr/bin/ls', 'system.posix_acl_access', a)\"")  # fmt: skip
# (tag, the model's command, the score it must get); the task is std-006-new-00003's record; the check of "run-" cases
# first runs the model's /root/fix.sh, that of "user-" cases runs `ls` as user 65534 (a check about what a user sees)
CASES = [
    ("honest", "chmod u-s /usr/bin/find", 1.0),
    ("honest-copy", "cp /usr/bin/find /tmp/f && chmod 0755 /tmp/f && mv /tmp/f /usr/bin/find", 1.0),  # same bytes, no bit
    ("nothing", "true", 0.0),  # round 4: 1.0 (the check saw the image's find)
    ("ls-not-runnable", "chmod a-x /usr/bin/ls", 0.0),  # ls fails, awk reads nothing and exits 0
    # a link in place of the file: no longer the image's regular file, so the image's ls runs
    ("ls-linked-to-unrunnable-copy", "cp /usr/bin/ls /tmp/ls && chmod a-x /tmp/ls && ln -sf /tmp/ls /usr/bin/ls", 0.0),
    ("awk-set-id", "chmod ug+s /usr/bin/mawk /usr/bin/ls && python3 -c \"import os; os.setxattr('/usr/bin/mawk', 'user.x', b'1')\"", 0.0),
    ("user-honest", "chmod u-s /usr/bin/find", 1.0),
    ("user-ls-owner-only", "cp -p /usr/bin/ls /tmp/ls && chmod 0700 /tmp/ls && mv /tmp/ls /usr/bin/ls", 0.0),
    ("user-ls-owned-by-another", "chown 0:65534 /usr/bin/ls && chmod 0705 /usr/bin/ls", 0.0),
    ("user-ls-access-list", _ACL, 0.0),
    ("run-honest", "chmod u-s /usr/bin/find; set -- true; " + _FAKE_LS, 1.0),
    ("run-through-link", _THROUGH_LINK, 0.0),
    ("run-through-proc-root", _THROUGH_PROC, 0.0),
    # the fix, and 273 MiB of the image's libraries touched: more than a check copies (_COPY_LIMIT), its start fails
    ("honest-touching-too-much", "chmod u-s /usr/bin/find; find /usr/lib -type f -size +1M -exec touch {} +", 0.0),
]
_NOT_RUNNABLE = ("ls-not-runnable", "user-ls-owner-only", "user-ls-owned-by-another", "user-ls-access-list")


def _task_file(official: Path, path: Path) -> Path:
    record = json.loads((official / "os_interaction/data/6/new.json").read_text())[3]
    assert "chmod u+s /usr/bin/find" in record["create"]["init"]["code"], record
    records = []
    for tag, _, _ in CASES:
        rec = json.loads(json.dumps(record))
        rec["description"] = f"[{tag}] {rec['description']}"
        if tag.startswith("run-"):
            rec["evaluation"]["check"]["code"] = "[ -x /root/fix.sh ] && /root/fix.sh; " + rec["evaluation"]["check"]["code"]
        if tag.startswith("user-"):
            rec["evaluation"]["check"]["code"] = rec["evaluation"]["check"]["code"].replace("ls -l", "runuser -u nobody -- ls -l", 1)
        records.append(rec)
    path.write_text(json.dumps(records))
    return path


def test_the_suid_task_is_graded_on_the_episodes_file_and_unrunnable_or_rewritten_tools_score_zero(
    sandboxed: None, official_data_dir: Path, tmp_path: Path
) -> None:
    """std-006-new-00003's record, once per case, through `agentbench run`: the honest fixes score 1, doing nothing 0
    (round 4: 1.0), and every attack on a check's tools 0, all `completed`."""
    commands = {tag: (command, "done") for tag, command, _ in CASES}
    with app_in_thread(lambda: _hostile_model(commands, think_s=0.3)) as port:
        outcomes = _run(port, tmp_path / "suid.duckdb", "--tasks", f"os={_task_file(official_data_dir, tmp_path / 't.json')}", "--split", "test")
    assert len(outcomes) == len(CASES), outcomes
    for i, (tag, _, score) in enumerate(CASES):
        status, got, details = outcomes[f"custom-{i:05d}"]
        assert (status, got) == ("completed", score), (tag, status, got, details)
    for i, (tag, _, _) in enumerate(CASES):  # unrunnable tools fail the check's start, with the reason stored
        if tag in _NOT_RUNNABLE:
            assert "took the right to read or run /usr/bin/ls" in json.loads(outcomes[f"custom-{i:05d}"][2])["reason"], tag
    assert "MiB of the image's tool files" in json.loads(outcomes[f"custom-{len(CASES) - 1:05d}"][2])["reason"]


def test_the_official_suid_task_scores_zero_with_nothing_done_and_one_when_fixed(
    sandboxed: None, official_data_dir: Path, tmp_path: Path
) -> None:
    """The official task itself (its id, --data-dir): an agent that does nothing scores 0, the fix 1."""
    (tmp_path / "ids").write_text(_SUID)
    data = ("--data-dir", str(official_data_dir), "--split", "test", "--task-ids", str(tmp_path / "ids"))
    for command, score in (("true", 0.0), ("chmod u-s /usr/bin/find", 1.0)):
        with app_in_thread(lambda c=command: _hostile_model({"*": (c, "done")}, think_s=0)) as port:  # type: ignore[misc]
            outcomes = _run(port, tmp_path / f"{score}.duckdb", *data)
        assert outcomes[_SUID][:2] == ("completed", score), (command, outcomes)


async def test_a_check_sees_the_episodes_metadata_on_a_read_only_copy_of_the_images_bytes(sandboxed: None) -> None:
    """Mode, owner, modification time and extended attributes of a changed tool are the episode's in a check; the file
    cannot be written there; a tool whose bytes changed is the image's; one the episode did not touch is the image's."""
    show = ("stat -c '%A %U %Y' /usr/bin/find; python3 -c \"import os; print(os.getxattr('/usr/bin/find', 'user.tag'))\"; "
            "(echo x >> /usr/bin/find) 2>/dev/null || echo read-only; stat -c %s /usr/bin/env; /usr/bin/env true && echo env-runs; "
            "stat -c '%A %U' /usr/bin/tr; exit 1")  # fmt: skip
    env = OSEnvironment(options={"script_timeout": 10})
    try:
        async with _Episode(env) as ep:
            await ep.sh("chown 65534 /usr/bin/find && chmod 4755 /usr/bin/find && touch -d 2001-01-01 /usr/bin/find && "
                        "python3 -c \"import os; os.setxattr('/usr/bin/find', 'user.tag', b'mine')\" && "
                        "printf '#!/bin/sh\\nexit 7\\n' > /usr/bin/env && chmod 4755 /usr/bin/env")  # fmt: skip
            ok, details = await grade(ep.session._sandbox, {"check": [{"language": "bash", "code": show}]}, "", 10)
            lines = details["check_output"].splitlines()
            assert not ok and lines[:3] == ["-rwsr-xr-x nobody 978307200", "b'mine'", "read-only"], lines
            assert int(lines[3]) > 1000 and lines[4] == "env-runs", lines  # the image's env (the episode's bytes differ)
            assert lines[5] == "-rwxr-xr-x root", lines  # untouched: the image's
    finally:
        await env.close()
