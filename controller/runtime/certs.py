"""The webhook's certificates, managed by the controller itself (as Kueue's internal cert
management does with open-policy-agent/cert-controller).

Every replica runs `WebhookCertificates.run_forever`:

1. read the Secret (`webhook.internalCertManagement.secretName` in the release namespace);
   if it holds a CA and a serving certificate for the webhook Service's DNS names that
   are valid for longer than `rotateBeforeSeconds`, use them; otherwise generate a new CA
   and serving certificate and store them in the Secret (create, or update at the
   resourceVersion read: when another replica wrote first, its certificates are used);
2. write `tls.crt`, `tls.key` and `ca.crt` into the webhook's `certDir` (atomically), so
   the webhook server picks them up without a restart (`webhook.CertReloader`);
3. inject the CA into the `caBundle` of the Mutating- and the ValidatingWebhookConfiguration
   (one name, two kinds; a missing one is skipped with a warning);
4. sleep until the certificate is due for rotation (at most an hour), and start over.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from controller.config import InternalCertManagement
from controller.kube.client import API_ERRORS

__all__ = ["CertificateSet", "WebhookCertificates", "issue", "service_dns_names"]

log = logging.getLogger(__name__)

CA_KEY, CERT_KEY, KEY_KEY = "ca.crt", "tls.crt", "tls.key"
_RECHECK_SECONDS = 3600.0


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server uses to reach the webhook Service (it verifies the first)."""
    return [
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
    ]


@dataclass(frozen=True)
class CertificateSet:
    """A CA and the serving certificate it signed, as PEM."""

    ca: bytes
    cert: bytes
    key: bytes

    def not_after(self) -> datetime.datetime:
        """When the first of the two expires."""
        return min(
            x509.load_pem_x509_certificate(pem).not_valid_after_utc for pem in (self.ca, self.cert)
        )

    def serves(self, names: list[str]) -> bool:
        """Whether the serving certificate names every one of `names` and the CA signed it."""
        try:
            cert = x509.load_pem_x509_certificate(self.cert)
            ca = x509.load_pem_x509_certificate(self.ca)
            serialization.load_pem_private_key(self.key, password=None)
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
            return False
        return set(names) <= set(san.get_values_for_type(x509.DNSName))


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def self_signed_ca(
    key: ec.EllipticCurvePrivateKey,
    name: x509.Name,
    start: datetime.datetime,
    end: datetime.datetime,
) -> x509.Certificate:
    """A CA certificate for `key`, signing leaf certificates only (path length 0)."""
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )


def issue(names: list[str], now: datetime.datetime, validity: datetime.timedelta) -> CertificateSet:
    """A new CA and a serving certificate for `names` (DNS names or IP addresses), both
    valid for `validity`."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "quotagate-webhook-ca")])
    start, end = now - datetime.timedelta(minutes=5), now + validity
    ca = self_signed_ca(ca_key, ca_name, start, end)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return CertificateSet(
        ca.public_bytes(pem),
        cert.public_bytes(pem),
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )


def _decoded(secret: dict[str, Any]) -> CertificateSet | None:
    data = secret.get("data") or {}
    try:
        return CertificateSet(*(base64.b64decode(data[k]) for k in (CA_KEY, CERT_KEY, KEY_KEY)))
    except (KeyError, ValueError, TypeError):
        return None


def _encoded(certs: CertificateSet) -> dict[str, str]:
    return {
        k: base64.b64encode(v).decode()
        for k, v in ((CA_KEY, certs.ca), (CERT_KEY, certs.cert), (KEY_KEY, certs.key))
    }


def write_files(directory: Path, certs: CertificateSet) -> None:
    """tls.crt, tls.key and ca.crt in `directory`, each replaced atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in ((CA_KEY, certs.ca), (KEY_KEY, certs.key), (CERT_KEY, certs.cert)):
        temporary = directory / f".{name}.tmp"
        temporary.write_bytes(content)
        if name == KEY_KEY:
            temporary.chmod(0o600)
        os.replace(temporary, directory / name)


class WebhookCertificates:
    """Keeps the webhook's certificates valid: Secret, files and caBundle (module docstring)."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        settings: InternalCertManagement,
        namespace: str,
        cert_dir: Path,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        extra_names: Sequence[str] = (),
        api_services: Sequence[str] = (),
    ) -> None:
        self.core = aio_client.CoreV1Api(api_client)
        self.admission = aio_client.AdmissionregistrationV1Api(api_client)
        self.registration = aio_client.ApiregistrationV1Api(api_client)
        self.api_services = tuple(api_services)
        self.settings = settings
        self.namespace = namespace
        self.cert_dir = cert_dir
        self.clock = clock
        self.names = [*service_dns_names(settings.service_name, namespace), *extra_names]
        self.current: CertificateSet | None = None

    def _usable(self, certs: CertificateSet | None) -> bool:
        if certs is None or not certs.serves(self.names):
            return False
        margin = datetime.timedelta(seconds=self.settings.rotate_before_seconds)
        return certs.not_after() - margin > self.clock()

    async def ensure(self) -> CertificateSet:
        """One pass: valid certificates in the Secret, in `cert_dir` and in the caBundle."""
        certs = await self._from_secret()
        if self.current is None or certs.cert != self.current.cert:
            write_files(self.cert_dir, certs)
            log.info(
                "webhook certificate for %s valid until %s",
                self.names[0],
                certs.not_after().isoformat(),
            )
        self.current = certs
        await self._inject_ca_bundle(certs.ca)
        return certs

    async def _from_secret(self) -> CertificateSet:
        name = self.settings.secret_name
        try:
            secret: Any = await self.core.read_namespaced_secret(name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            secret = None
        body = self.core.api_client.sanitize_for_serialization(secret) if secret else None
        existing = _decoded(body) if body else None
        if self._usable(existing):
            assert existing is not None
            return existing
        certs = issue(self.names, self.clock(), self._validity())
        wanted: Any = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": self.namespace},
            "type": "Opaque",
            "data": _encoded(certs),
        }
        try:
            if body is None:
                await self.core.create_namespaced_secret(self.namespace, wanted)
            else:
                wanted["metadata"] = {**body["metadata"]}  # keeps the resourceVersion read
                await self.core.replace_namespaced_secret(name, self.namespace, wanted)
        except ApiException as exc:
            if exc.status != 409:
                raise
            return await self._from_secret()  # another replica wrote first: use its certs
        log.info("issued a new webhook CA and certificate into Secret %s/%s", self.namespace, name)
        return certs

    def _validity(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.settings.validity_seconds)

    async def _inject_ca_bundle(self, ca: bytes) -> None:
        admission = self.admission
        for kind, read, replace in (
            (
                "MutatingWebhookConfiguration",
                admission.read_mutating_webhook_configuration,
                admission.replace_mutating_webhook_configuration,
            ),
            (
                "ValidatingWebhookConfiguration",
                admission.read_validating_webhook_configuration,
                admission.replace_validating_webhook_configuration,
            ),
        ):
            await self._inject_into(kind, read, replace, base64.b64encode(ca).decode())
        for name in self.api_services:
            await self._inject_into_api_service(name, ca)

    async def _inject_into_api_service(self, name: str, ca: bytes) -> None:
        """Set `ca` as the APIService's caBundle (the visibility API: the aggregator then
        verifies our serving certificate, where Kueue's APIService skips the check)."""
        bundle = base64.b64encode(ca).decode()
        for _ in range(5):
            try:
                service: Any = await self.registration.read_api_service(name)
            except ApiException as exc:
                if exc.status == 404:
                    log.warning("APIService %s not found: no caBundle set", name)
                    return
                raise
            body = self.registration.api_client.sanitize_for_serialization(service)
            spec = body.setdefault("spec", {})
            if spec.get("caBundle") == bundle and not spec.get("insecureSkipTLSVerify"):
                return
            spec["caBundle"] = bundle
            spec.pop("insecureSkipTLSVerify", None)
            try:
                await self.registration.replace_api_service(name, body)
                log.info("caBundle of APIService %s updated", name)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise

    async def _inject_into(self, kind: str, read: Any, replace: Any, bundle: str) -> None:
        """Set `bundle` as the caBundle of every webhook of one configuration (retried on a
        conflict with another writer)."""
        name = self.settings.configuration_name
        for _ in range(5):
            try:
                config: Any = await read(name)
            except ApiException as exc:
                if exc.status == 404:
                    log.warning("%s %s not found: no caBundle set", kind, name)
                    return
                raise
            body = self.admission.api_client.sanitize_for_serialization(config)
            hooks = body.get("webhooks") or []
            if all((h.get("clientConfig") or {}).get("caBundle") == bundle for h in hooks):
                return
            for hook in hooks:
                hook.setdefault("clientConfig", {})["caBundle"] = bundle
            try:
                await replace(name, body)
                log.info("caBundle of %s %s updated", kind, name)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise

    def seconds_until_rotation(self) -> float:
        if self.current is None:
            return 0.0
        margin = datetime.timedelta(seconds=self.settings.rotate_before_seconds)
        due = (self.current.not_after() - margin - self.clock()).total_seconds()
        return max(1.0, min(_RECHECK_SECONDS, due))

    async def run_forever(self, on_ready: Callable[[], None] | None = None) -> None:
        """Keep the certificates valid until cancelled; `on_ready` after the first pass."""
        failures = 0
        while True:
            try:
                await self.ensure()
            except API_ERRORS as exc:
                failures += 1
                delay = min(60.0, 2.0**failures)
                log.warning("webhook certificates not ensured (%s); retrying in %.0fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            failures = 0
            if on_ready is not None:
                on_ready()
                on_ready = None
            await asyncio.sleep(self.seconds_until_rotation())
