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

from worldserve.dev.services import wait_redis_ready


def _commands(buffer: bytearray) -> list[bytes]:
    """Take the complete RESP commands (arrays of bulk strings) off the front of ``buffer``;
    each is given as its name, upper-cased."""
    names: list[bytes] = []
    while True:
        pos, parts = 0, []
        try:
            end = buffer.index(b"\r\n", pos)
            count = int(buffer[pos + 1:end])
            pos = end + 2
            for _ in range(count):
                end = buffer.index(b"\r\n", pos)
                size = int(buffer[pos + 1:end])
                if len(buffer) < end + 2 + size + 2:
                    return names
                parts.append(bytes(buffer[end + 2:end + 2 + size]))
                pos = end + 2 + size + 2
        except ValueError:  # no complete header yet
            return names
        del buffer[:pos]
        names.append(parts[0].upper())


def _loading_server(loading_replies: int) -> tuple[int, list[bytes]]:
    """A listener that answers ``-LOADING`` to the first N PINGs, then ``+PONG``; the client's
    HELLO gets an error (as from a RESP2-only server) and its CLIENT SETINFO ``+OK``.

    Each connection is served on its own thread: redis-py may dial a new connection after a
    LOADING reply before it closes the old one.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    seen: list[bytes] = []
    lock = threading.Lock()
    left = [loading_replies]

    def reply(name: bytes) -> bytes:
        with lock:
            seen.append(name)
            if name != b"PING":
                return b"+OK\r\n" if name == b"CLIENT" else b"-ERR unknown command\r\n"
            if left[0] > 0:
                left[0] -= 1
                return b"-LOADING Redis is loading the dataset in memory\r\n"
            return b"+PONG\r\n"

    def answer(conn: socket.socket) -> None:
        buffer = bytearray()
        with conn:
            while data := conn.recv(4096):
                buffer += data
                conn.sendall(b"".join(reply(name) for name in _commands(buffer)))

    def serve() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return port, seen


def test_waits_through_loading_replies() -> None:
    port, seen = _loading_server(loading_replies=3)
    wait_redis_ready(f"redis://127.0.0.1:{port}/0", timeout_s=30)
    assert seen.count(b"PING") == 4  # three answered LOADING, the fourth PONG


def test_times_out_while_still_loading() -> None:
    port, _ = _loading_server(loading_replies=10**6)
    with pytest.raises(TimeoutError, match="did not answer PING"):
        wait_redis_ready(f"redis://127.0.0.1:{port}/0", timeout_s=0.5)


def test_a_server_that_exited_is_reported_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait(10)
    with pytest.raises(RuntimeError, match="exited with code 3"):
        wait_redis_ready(f"redis://127.0.0.1:{port}/0", timeout_s=10, process=process)
