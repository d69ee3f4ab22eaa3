"""The webhook's certificates (controller/runtime/certs.py) and the server's hot reload
(controller/runtime/webhook_server.CertReloader): no Kubernetes needed here; the Secret and
caBundle side runs against the real API server in tests/integration/test_webhook_certs.py."""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl

from cryptography import x509

from controller.runtime import webhook_server as webhook
from controller.runtime.certs import issue, service_dns_names, write_files

NOW = datetime.datetime(2026, 11, 24, tzinfo=datetime.UTC)
NAMES = service_dns_names("qg-quotagate-webhook", "quotagate-system")


def test_an_issued_certificate_serves_the_service_names_and_is_signed_by_its_ca() -> None:
    certs = issue(NAMES, NOW, datetime.timedelta(days=30))
    assert NAMES[0] == "qg-quotagate-webhook.quotagate-system.svc"
    assert certs.serves(NAMES)
    assert not certs.serves([*NAMES, "other.svc"])
    assert certs.not_after() == NOW + datetime.timedelta(days=30)
    other = issue(NAMES, NOW, datetime.timedelta(days=30))
    mixed = type(certs)(other.ca, certs.cert, certs.key)  # a CA that did not sign it
    assert not mixed.serves(NAMES)


def test_files_are_replaced_whole_and_the_key_is_private(tmp_path) -> None:  # type: ignore[no-untyped-def]
    certs = issue(NAMES, NOW, datetime.timedelta(days=1))
    write_files(tmp_path / "certs", certs)
    assert (tmp_path / "certs" / "tls.crt").read_bytes() == certs.cert
    assert (tmp_path / "certs" / "ca.crt").read_bytes() == certs.ca
    assert (tmp_path / "certs" / "tls.key").stat().st_mode & 0o777 == 0o600
    assert not list((tmp_path / "certs").glob(".*.tmp"))


def _served_serial(port: int) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port)) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_the_server_picks_up_new_certificate_files_without_a_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    now = datetime.datetime.now(datetime.UTC)
    first = issue(NAMES, now, datetime.timedelta(days=1))
    write_files(tmp_path, first)
    reloader = webhook.CertReloader(
        webhook.ServingCert(tmp_path / "tls.crt", tmp_path / "tls.key", first.ca)
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def scenario() -> tuple[int, int, int]:
        runner = await webhook.serve("127.0.0.1", port, reloader)
        watcher = asyncio.create_task(reloader.watch(interval=0.05))
        try:
            before = await asyncio.to_thread(_served_serial, port)
            second = issue(NAMES, now, datetime.timedelta(days=1))
            write_files(tmp_path, second)
            for _ in range(100):  # the watcher notices within a few intervals
                await asyncio.sleep(0.05)
                after = await asyncio.to_thread(_served_serial, port)
                if after != before:
                    break
            expected = x509.load_pem_x509_certificate(second.cert).serial_number
            return before, after, expected
        finally:
            watcher.cancel()
            await runner.cleanup()

    before, after, expected = asyncio.run(scenario())
    assert before == x509.load_pem_x509_certificate(first.cert).serial_number
    assert after == expected
