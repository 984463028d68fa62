"""Self-signed certificate for ``--tls``: made once on first start and reused from a cache directory."""

from __future__ import annotations

import datetime
import ipaddress
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pve-emulator"


def self_signed(
    name: Any,
    key: Any,
    *,
    valid: datetime.timedelta,
    backdate: datetime.timedelta,
    extensions: Sequence[tuple[Any, bool]],
) -> Any:
    """An X.509 certificate `key` signs for itself (a CA, or a lone server certificate): SHA-256, valid
    from `backdate` ago (clock skew between the emulator and its clients) for `valid`, with `extensions`
    as (extension, critical) pairs. One builder for every certificate the emulator makes for itself."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - backdate)
        .not_valid_after(now + valid)
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(key, hashes.SHA256())


def ensure_certificate(directory: Path | None = None) -> tuple[Path, Path]:
    """Return (certificate, key) paths, creating an EC P-256 self-signed pair if absent.

    Key and certificate share one PEM file that is replaced atomically, so concurrent first starts
    (parallel test runs) never see a certificate with somebody else's key.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory = directory or DEFAULT_DIR
    pem_path = directory / "pve-emulator-ssl.pem"
    if pem_path.is_file():
        return pem_path, pem_path
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        if directory != DEFAULT_DIR:
            raise
        # read-only home (some CI runners): fall back to a per-user temporary directory
        directory = Path(tempfile.gettempdir()) / f"pve-emulator-{os.getuid()}"
        return ensure_certificate(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "pve-emulator"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "hvsync pve-emulator"),
        ]
    )
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = self_signed(
        name,
        key,
        valid=datetime.timedelta(days=3650),
        backdate=datetime.timedelta(days=1),
        extensions=[(san, False)],
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    tmp = directory / f".pve-emulator-ssl.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key_pem + cert.public_bytes(serialization.Encoding.PEM))
    tmp.replace(pem_path)
    return pem_path, pem_path


def make_test_pki(directory: Path) -> tuple[Path, Path]:
    """A fresh certificate authority and a server certificate it signed, for one emulator under test:
    returns (CA file clients verify with, server PEM holding key and certificate chain).

    Made anew in ``directory`` for each emulator (a few milliseconds with EC P-256), so parallel test
    workers share no file, and a client can verify the server (``verify=ca_file``) instead of
    switching verification off. The server certificate names ``localhost`` and ``127.0.0.1``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pve-emulator test CA")])
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    ca_cert = self_signed(
        ca_name,
        ca_key,
        valid=datetime.timedelta(days=30),
        backdate=datetime.timedelta(hours=1),
        extensions=[
            (x509.BasicConstraints(ca=True, path_length=0), True),
            (usage, True),
            (x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False),
        ],
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca_cert.public_bytes(pem))
    server_file = directory / "server.pem"
    fd = os.open(server_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            + cert.public_bytes(pem)
        )
    return ca_file, server_file
