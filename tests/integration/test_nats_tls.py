"""NATS over TLS (for a server that is not on loopback): a ``tls://`` URL with NOEMA_NATS_TLS_CA
verifies the server's certificate, and a server signed by an unknown CA is refused."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import nats.errors
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from noema.adapters.jetstream import connect
from noema.runtime.embedded import _nats_binary, free_port
from noema.runtime.settings import NatsAuth

pytestmark = pytest.mark.integration


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificate(folder: Path, stem: str) -> tuple[Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it; returns (ca file, server key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{stem} CA"))
        .issuer_name(_name(f"{stem} CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    (folder / f"{stem}-ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / f"{stem}-key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return folder / f"{stem}-ca.pem", folder / f"{stem}-key.pem"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """A nats-server that speaks TLS only and needs a password; yields (URL, its CA, another CA)."""
    folder = tmp_path_factory.mktemp("tls")
    ca, key = _certificate(folder, "server")
    other_ca, _ = _certificate(folder, "other")
    port = free_port()
    conf = folder / "nats.conf"
    conf.write_text(
        f'listen: "127.0.0.1:{port}"\n'
        f'tls {{ cert_file: "{folder / "server.pem"}", key_file: "{key}" }}\n'
        'authorization { users = [{user: "noema-operator", password: "pw"}] }\n'
    )
    proc = subprocess.Popen([_nats_binary(), "-c", str(conf)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nats-server did not start"
                time.sleep(0.05)
        yield f"tls://noema-operator:pw@127.0.0.1:{port}", ca, other_ca
    finally:
        proc.terminate()
        proc.wait(10)


async def test_a_tls_url_with_the_servers_ca_connects(tls_server: tuple[str, Path, Path]) -> None:
    url, ca, _ = tls_server
    nc = await connect(url, name="test-tls", auth=NatsAuth(tls_ca=ca))
    try:
        assert nc.is_connected
        await nc.flush()
    finally:
        await nc.close()


async def test_a_server_signed_by_another_ca_is_refused(tls_server: tuple[str, Path, Path]) -> None:
    url, _, other_ca = tls_server
    with pytest.raises((nats.errors.Error, OSError)):
        await connect(url, name="test-tls", auth=NatsAuth(tls_ca=other_ca), allow_reconnect=False)
