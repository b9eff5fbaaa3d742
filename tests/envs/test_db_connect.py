"""db: connections to the server survive a full listen queue (a run's episodes all connecting at once on loaded
cores), and a server that is gone fails at once."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pymysql
import pytest

from agentbench_async.envs.db import server


# a server's error packet (MySQL client/server protocol: 3-byte length, sequence 0, 0xff, error code, '#', SQLSTATE)
_PAYLOAD = b"\xff" + (1040).to_bytes(2, "little") + b"#08004Too many connections"
_ERROR_PACKET = len(_PAYLOAD).to_bytes(3, "little") + b"\x00" + _PAYLOAD


def _full_listener(path: Path) -> tuple[socket.socket, socket.socket]:
    """A unix socket whose listen queue is full: the next connect is refused with EAGAIN, as a busy server's is."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(0)
    filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    filler.connect(str(path))  # queued, never accepted: the queue (length 0 + 1) is now full
    return listener, filler


def test_a_full_listen_queue_is_waited_out_and_the_server_then_reached(tmp_path: Path) -> None:
    path = tmp_path / "mysqld.sock"
    listener, filler = _full_listener(path)
    with pytest.raises(pymysql.OperationalError, match=r"\[Errno 11\]"):
        pymysql.connect(unix_socket=str(path), user="u", password="p", connect_timeout=2)  # what an episode got
    reached = threading.Event()

    def _accept_later() -> None:  # the server catches up after 0.3 s and answers "Too many connections"
        time.sleep(0.3)
        for _ in range(2):  # the filler, then the retried connection
            conn, _ = listener.accept()
            conn.sendall(_ERROR_PACKET)
            conn.close()
        reached.set()

    accepting = threading.Thread(target=_accept_later, daemon=True)
    accepting.start()
    started = time.monotonic()
    with pytest.raises(pymysql.OperationalError) as caught:  # past the queue: the server's own answer is raised
        server.connect(unix_socket=str(path), user="u", password="p", connect_timeout=2)
    accepting.join(5)  # the client can read the answer before the server's thread marks it sent
    assert reached.is_set() and caught.value.args[0] == 1040
    assert time.monotonic() - started < 5
    filler.close()
    listener.close()


def test_a_server_that_is_gone_fails_at_once(tmp_path: Path) -> None:
    path = tmp_path / "mysqld.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # bound, never listening: connections are refused (not a full queue)
    started = time.monotonic()
    with pytest.raises(pymysql.OperationalError):
        server.connect(unix_socket=str(path), user="u", password="p", connect_timeout=2)
    assert time.monotonic() - started < 1
    dead.close()


def test_the_private_server_takes_256_episodes_at_once_and_a_server_of_ones_own_64() -> None:
    from agentbench_async.envs.db import DBEnvironment

    assert DBEnvironment(options={}).capacity == 256
    assert DBEnvironment(options={"db_url": "mysql://u:p@127.0.0.1:3306/"}).capacity == 64
    assert DBEnvironment(options={"db_url": "mysql://u:p@127.0.0.1:3306/", "capacity": 300}).capacity == 300
