"""Certificates made at test time, with the `cryptography` package: self-signed ones for the TLS listeners, and an
authority with the client certificates it signs (mutual TLS)."""

from __future__ import annotations

import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _certificate(subject: x509.Name, key, issuer: x509.Name, signing_key, ca: bool, extensions=()):
    """A certificate of `subject`'s `key`, valid from five minutes ago for a day, signed by `issuer`'s key."""
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True))
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def _write(directory, name: str, cert, key) -> tuple[str, str]:
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return str(cert_path), str(key_path)


def self_signed(directory, name: str) -> tuple[str, str]:
    """(certificate path, key path) of a new self-signed certificate for localhost and 127.0.0.1."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    names = x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    return _write(directory, name, _certificate(subject, key, subject, key, True, [names]), key)


def authority(directory, name: str) -> tuple[str, object, object]:
    """(certificate path, certificate, key) of a new certificate authority (it signs client certificates)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    cert = _certificate(subject, key, subject, key, True)
    path = directory / f"{name}-ca.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path), cert, key


def client_certificate(directory, ca, name: str, subject: list[tuple]) -> tuple[str, str]:
    """(certificate path, key path) of a client certificate `ca` (from `authority`) signs for `subject`, a list of
    (NameOID, value) in the certificate's order (e.g. [(NameOID.ORGANIZATION_NAME, "Acme"), (NameOID.COMMON_NAME,
    "alice")])."""
    _, ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    names = x509.Name([x509.NameAttribute(oid, value) for oid, value in subject])
    return _write(directory, name, _certificate(names, key, ca_cert.subject, ca_key, False), key)
