"""Certificates and keys for a throwaway control plane.

Why real TLS and client certificates rather than an insecure port: the scheduler must be
tested the way it runs, authenticated and authorized by RBAC (``--authorization-mode=Node,RBAC``).
A fresh CA per cluster signs the apiserver's serving certificate (127.0.0.1, localhost and the
in-cluster names), one client certificate per identity (`CLIENTS`: the admin in group
``system:masters``, and kube-controller-manager and kube-scheduler as the users the bootstrap
RBAC roles name, exactly as kubeadm sets them up; kwok), and serving certificates for the other
loopback servers (`loopback_serving`); a separate RSA key pair signs and verifies
ServiceAccount tokens. Everything is short-lived and lives in the cluster's state directory only.
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
LOOPBACK_DNS_NAMES = ("localhost",)
LOOPBACK_IP = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Identity:
    """A client certificate's subject: the user (CN) and group (O) the apiserver sees."""

    user: str
    group: str | None = None


# File stem -> identity. kube-controller-manager and kube-scheduler are the users that the
# apiserver's bootstrap ClusterRoles (system:kube-controller-manager, system:kube-scheduler)
# are bound to, so RBAC gives them what they need and nothing more.
CLIENTS: dict[str, Identity] = {
    "admin": Identity(ADMIN_USER, ADMIN_GROUP),
    "kube-controller-manager": Identity("system:kube-controller-manager"),
    "kube-scheduler": Identity("system:kube-scheduler"),
    # kwok acts for every fake node at once (see kwok.py).
    "kwok": Identity("kwok-controller", "system:masters"),
    # The training operators, with their own releases' ClusterRoles (operators.py).
    "jobset": Identity("jobset-controller"),
    "trainer": Identity("trainer-controller"),
    "kueue": Identity("kueue-controller"),
    "training-operator": Identity("training-operator-controller"),
    "kuberay": Identity("kuberay-operator"),
    # The fake DRA driver (dra_driver.py), with its own ClusterRole.
    "dra-driver": Identity("gang-scheduler-dev-dra-driver"),
    # cluster-autoscaler (autoscaler.py), bound to cluster-admin there.
    "cluster-autoscaler": Identity("cluster-autoscaler"),
}


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

    def client(self, stem: str) -> tuple[Path, Path]:
        """(certificate, key) of the client identity `stem` (a key of `CLIENTS`)."""
        pki = self.ca_cert.parent
        return pki / f"{stem}.crt", pki / f"{stem}.key"

    def serving(self, stem: str) -> tuple[Path, Path]:
        """(certificate, key) of the loopback serving certificate `stem`."""
        pki = self.ca_cert.parent
        return pki / f"{stem}-serving.crt", pki / f"{stem}-serving.key"


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


def _ca(now: dt.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    subject = _name("gang-scheduler-dev-cluster-ca")
    cert = (
        _builder(subject, subject, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_encipherment=False, content_commitment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False,
        ), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _sans(dns_names: tuple[str, ...], ips: tuple[str, ...]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    return names + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]


def generate(pki: Path) -> CertPaths:
    """Create a fresh CA, the apiserver's serving certificate, one client certificate per
    identity in `CLIENTS` and the ServiceAccount key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    pki.chmod(0o700)
    paths = CertPaths.under(pki)
    now = dt.datetime.now(dt.UTC)

    ca_cert, ca_key = _ca(now)
    _write_key(paths.ca_key, ca_key)
    _write_cert(paths.ca_cert, ca_cert)

    sans = _sans(SERVER_DNS_NAMES, (LOOPBACK_IP, SERVICE_IP))
    server_cert, server_key = _leaf(ca_cert, ca_key, _name("kube-apiserver"),
                                    ExtendedKeyUsageOID.SERVER_AUTH, sans, now)
    _write_key(paths.server_key, server_key)
    _write_cert(paths.server_cert, server_cert)

    for stem, identity in CLIENTS.items():
        cert, key = _leaf(ca_cert, ca_key, _name(identity.user, identity.group),
                          ExtendedKeyUsageOID.CLIENT_AUTH, None, now)
        cert_path, key_path = paths.client(stem)
        _write_key(key_path, key)
        _write_cert(cert_path, cert)

    # RSA, not EC: every consumer of the tokens' JWKS understands RS256.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(paths.sa_key, sa_key)
    paths.sa_pub.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo,
    ))
    return paths


def loopback_serving(paths: CertPaths, stem: str,
                     dns_names: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """A serving certificate signed by the cluster CA for a server on 127.0.0.1 (a controller's
    health port, a webhook), so clients verify it with the CA instead of skipping checks.
    `dns_names` adds names (a webhook Service's in-cluster name, say) to localhost."""
    ca_cert = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{paths.ca_key}: expected the EC key this module writes")
    sans = _sans((*LOOPBACK_DNS_NAMES, *dns_names), (LOOPBACK_IP,))
    cert, key = _leaf(ca_cert, ca_key, _name(stem), ExtendedKeyUsageOID.SERVER_AUTH, sans,
                      dt.datetime.now(dt.UTC))
    cert_path, key_path = paths.serving(stem)
    _write_key(key_path, key)
    _write_cert(cert_path, cert)
    return cert_path, key_path
