"""A bundled Redis counts as started once it answers PING, not once its port opens.

CI failed once on `test_bundled_redis_keeps_data_across_a_restart`: the restarted server had its
port open and was still replaying its AOF, so the first GET got ``LOADING``. The server below
speaks just enough RESP to answer PING the way such a server does.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest

from worldserve.dev.services import wait_ready


def _loading_server(loading_replies: int) -> tuple[int, list[bytes], threading.Thread]:
    """A listener that answers ``-LOADING`` to the first N commands, then ``+PONG``."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    seen: list[bytes] = []

    def serve() -> None:
        left = loading_replies
        with listener:
            while True:  # redis-py drops the connection after a LOADING reply and dials again
                conn, _ = listener.accept()
                with conn:
                    while True:
                        data = conn.recv(4096)
                        if not data:
                            break
                        seen.append(data)
                        if b"PING" not in data.upper():  # HELLO/SETINFO from newer clients
                            conn.sendall(b"-ERR unknown command\r\n")
                        elif left > 0:
                            left -= 1
                            conn.sendall(b"-LOADING Redis is loading the dataset in memory\r\n")
                        else:
                            conn.sendall(b"+PONG\r\n")
                            return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return port, seen, thread


def test_waits_through_loading_replies() -> None:
    port, seen, thread = _loading_server(loading_replies=3)
    wait_ready(f"redis://127.0.0.1:{port}/0", timeout_s=10)
    pings = [d for d in seen if b"PING" in d.upper()]
    assert len(pings) == 4  # three answered LOADING, the fourth PONG
    thread.join(5)


def test_times_out_while_still_loading() -> None:
    port, _, _ = _loading_server(loading_replies=10**6)
    with pytest.raises(TimeoutError, match="did not answer PING"):
        wait_ready(f"redis://127.0.0.1:{port}/0", timeout_s=0.5)


def test_a_server_that_exited_is_reported_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait(10)
    with pytest.raises(RuntimeError, match="exited with code 3"):
        wait_ready(f"redis://127.0.0.1:{port}/0", timeout_s=10, process=process)
