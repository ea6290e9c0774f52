"""Certificates and keys for a throwaway control plane.

Why real TLS and client certificates rather than an insecure port: the scheduler must be
tested the way it runs, authenticated and authorized by RBAC (``--authorization-mode=Node,RBAC``).
A fresh CA per cluster signs the apiserver's serving certificate (127.0.0.1, localhost and the
in-cluster names) and an admin client certificate in group ``system:masters``; a separate RSA key
pair signs and verifies ServiceAccount tokens. Everything is short-lived and lives in the
cluster's state directory only.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=30)
SERVICE_IP = "10.0.0.1"  # first address of --service-cluster-ip-range, the `kubernetes` Service
SERVER_DNS_NAMES = (
    "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
ADMIN_USER = "dev-cluster-admin"
ADMIN_GROUP = "system:masters"


@dataclass(frozen=True, slots=True)
class CertPaths:
    """Where each PEM file lives inside the cluster's pki directory."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path  # private: signs ServiceAccount tokens
    sa_pub: Path  # public: verifies them

    @classmethod
    def under(cls, pki: Path) -> CertPaths:
        return cls(
            pki / "ca.crt", pki / "ca.key", pki / "apiserver.crt", pki / "apiserver.key",
            pki / "admin.crt", pki / "admin.key", pki / "sa.key", pki / "sa.pub",
        )


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey,
             now: dt.datetime) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))  # tolerate small clock skew
        .not_valid_after(now + VALIDITY)
    )


def _leaf(ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, subject: x509.Name,
          usage: x509.ObjectIdentifier, sans: list[x509.GeneralName] | None,
          now: dt.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    builder = (
        _builder(subject, ca_cert.subject, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_encipherment=False, content_commitment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
            encipher_only=False, decipher_only=False,
        ), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def generate(pki: Path) -> CertPaths:
    """Create a fresh CA, serving and admin certificates and the ServiceAccount key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    pki.chmod(0o700)
    paths = CertPaths.under(pki)
    now = dt.datetime.now(dt.UTC)

    ca_key = _key()
    ca_subject = _name("gang-scheduler-dev-cluster-ca")
    ca_cert = (
        _builder(ca_subject, ca_subject, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_encipherment=False, content_commitment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False,
        ), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(paths.ca_key, ca_key)
    _write_cert(paths.ca_cert, ca_cert)

    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVER_DNS_NAMES]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", SERVICE_IP)]
    server_cert, server_key = _leaf(ca_cert, ca_key, _name("kube-apiserver"),
                                    ExtendedKeyUsageOID.SERVER_AUTH, sans, now)
    _write_key(paths.server_key, server_key)
    _write_cert(paths.server_cert, server_cert)

    admin_cert, admin_key = _leaf(ca_cert, ca_key, _name(ADMIN_USER, ADMIN_GROUP),
                                  ExtendedKeyUsageOID.CLIENT_AUTH, None, now)
    _write_key(paths.admin_key, admin_key)
    _write_cert(paths.admin_cert, admin_cert)

    # RSA, not EC: every consumer of the tokens' JWKS understands RS256.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(paths.sa_key, sa_key)
    paths.sa_pub.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo,
    ))
    return paths
