"""Under `worldserve up` settings nothing but the gateway is reachable from outside the machine:
the model server's Triton gRPC/HTTP/metrics ports and its engine metrics, and the gateway's
metrics, listen on 127.0.0.1 only (issue 16). Read from the kernel's socket table."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest

from tests.conftest import MODEL_PORTS
from worldserve.dev.services import free_port
from worldserve.observability import metrics

pytestmark = pytest.mark.integration
LISTEN = "0A"


def listening(port: int) -> set[str]:
    """The local addresses that listen on ``port`` (IPv4 and IPv6), as the kernel reports them."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == LISTEN and int(hex_port, 16) == port:
                raw = bytes.fromhex(address)
                if width == 8:
                    found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:  # four little-endian 32-bit words
                    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                    found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


def loopback_only(addresses: set[str]) -> bool:
    """Some address, and every one of them a loopback one (``::ffff:127.0.0.1`` included)."""
    def loop(text: str) -> bool:
        ip = ipaddress.ip_address(text)
        mapped = getattr(ip, "ipv4_mapped", None)
        return ip.is_loopback or bool(mapped and mapped.is_loopback)
    return bool(addresses) and all(loop(a) for a in addresses)


def test_the_check_tells_wildcards_from_loopback() -> None:
    assert loopback_only({"127.0.0.1", "::ffff:127.0.0.1", "::1"})
    assert not loopback_only({"0.0.0.0"}) and not loopback_only({"::"}) and not loopback_only(set())


def test_model_server_ports_listen_on_loopback_only(triton_url: str) -> None:
    ports = MODEL_PORTS[triton_url]
    assert len(ports) == 4
    for port in ports:
        assert loopback_only(listening(port)), (port, listening(port))


def test_gateway_metrics_listen_on_loopback_by_default() -> None:
    port = free_port()
    metrics.serve(port)
    assert listening(port) == {"127.0.0.1"}
