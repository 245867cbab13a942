"""TLS and mutual TLS on the gateway, with certificates made for the test (real handshakes)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import TEST_KEY
from tests.integration.backends import EchoBackend
from tests.integration.helpers import auth, running_gateway
from worldserve.sdk import AsyncClient, tls_credentials
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb
from worldserve.v1 import simulator_pb2_grpc as pb_grpc

pytestmark = pytest.mark.integration


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _issue(subject: str, issuer_key: ec.EllipticCurvePrivateKey | None,
           issuer: x509.Name | None, ca: bool, san: str | None = None
           ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(subject))
               .issuer_name(issuer or _name(subject)).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=1))
               .not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]),
                                        critical=False)
    return key, builder.sign(issuer_key or key, hashes.SHA256())


def _pem(obj: object) -> bytes:
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    assert isinstance(obj, ec.EllipticCurvePrivateKey)
    return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pki")
    ca_key, ca = _issue("worldserve test CA", None, None, ca=True)
    server_key, server = _issue("localhost", ca_key, ca.subject, ca=False, san="localhost")
    client_key, client = _issue("rl-team", ca_key, ca.subject, ca=False)
    files = {"ca": _pem(ca), "server": _pem(server), "server_key": _pem(server_key),
             "client": _pem(client), "client_key": _pem(client_key)}
    for name, data in files.items():
        (d / f"{name}.pem").write_bytes(data)
    return {name: d / f"{name}.pem" for name in files}


async def _reachable(target: str, credentials: grpc.ChannelCredentials | None) -> bool:
    channel = (grpc.aio.secure_channel(target, credentials) if credentials
               else grpc.aio.insecure_channel(target))
    async with channel:
        try:
            await pb_grpc.SimulatorStub(channel).ListSessions(
                pb.ListSessionsRequest(), metadata=auth(TEST_KEY), timeout=3)
            return True
        except grpc.aio.AioRpcError as exc:
            assert exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            return False


async def test_tls_gateway(key_prefix: str, redis_url: str, pki: dict[str, Path]) -> None:
    settings = Settings(gateway_port=0, gateway_host="localhost", key_prefix=key_prefix,
                        dev_api_key=TEST_KEY, tls_cert_file=pki["server"],
                        tls_key_file=pki["server_key"])
    async with running_gateway(settings, redis_url, EchoBackend()) as gw:
        target = f"localhost:{gw.port}"
        assert await _reachable(target, tls_credentials(pki["ca"].read_bytes()))
        assert not await _reachable(target, None)  # plaintext is refused
        async with AsyncClient(target, api_key=TEST_KEY,
                               credentials=tls_credentials(pki["ca"].read_bytes())) as client:
            s = await client.create_session("TERMINAL")
            assert (await client.step(s.session_id, "ls")).observation == "did: ls"


async def test_mutual_tls_gateway(key_prefix: str, redis_url: str, pki: dict[str, Path]) -> None:
    settings = Settings(gateway_port=0, gateway_host="localhost", key_prefix=key_prefix,
                        dev_api_key=TEST_KEY, tls_cert_file=pki["server"],
                        tls_key_file=pki["server_key"], tls_client_ca_file=pki["ca"])
    async with running_gateway(settings, redis_url, EchoBackend()) as gw:
        target = f"localhost:{gw.port}"
        ca = pki["ca"].read_bytes()
        assert not await _reachable(target, tls_credentials(ca))  # no client certificate
        assert await _reachable(target, tls_credentials(
            ca, pki["client"].read_bytes(), pki["client_key"].read_bytes()))


def test_half_configured_tls_is_an_error(pki: dict[str, Path]) -> None:
    from worldserve.gateway.server import server_credentials

    with pytest.raises(ValueError, match="both"):
        server_credentials(Settings(tls_cert_file=pki["server"]))
