"""Connecting like kubectl: `--kubeconfig`, `--context`, the context's namespace, and
kubectl-style one-line errors with kubectl's exit codes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import urllib3
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from controller.kube.client import status_of
from controller.kubectl.printing import one_line

__all__ = [
    "Connection",
    "ConnectionOptions",
    "KubectlError",
    "connect",
    "server_error",
    "transport_error",
]

# The kubeconfig loaders are untyped; call them through an Any-typed reference.
config: Any = kube_config
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubectlError(Exception):
    """An error printed as one line on stderr, exiting with kubectl's code (1).

    `status` is the HTTP status for an error from the server (None otherwise), so a caller
    may tolerate a Forbidden list and still refuse a refused connection."""

    def __init__(self, message: str, status: int | None = None, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = one_line(message)
        self.status = status
        self.exit_code = exit_code


@dataclass(frozen=True, slots=True)
class ConnectionOptions:
    """kubectl's global flags that the plugin honours."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    request_timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Connection:
    """A ready API client and the namespace to use when `-n` is not given."""

    api_client: client.ApiClient
    default_namespace: str
    request_timeout: float | None

    @property
    def server(self) -> str:
        return urlparse(self.api_client.configuration.host).netloc or str(
            self.api_client.configuration.host
        )


def connect(options: ConnectionOptions, environ: Mapping[str, str] = os.environ) -> Connection:
    """Load the kubeconfig as kubectl does (flag, then $KUBECONFIG, then ~/.kube/config; the
    in-cluster ServiceAccount when none exists) and open a client for the chosen context."""
    files = _kubeconfig_files(options.kubeconfig, environ)
    if files is None:
        return _in_cluster(options)
    try:
        contexts, current = config.list_kube_config_contexts(files)
        name = options.context or (current or {}).get("name")
        chosen = next((c for c in contexts or () if c.get("name") == name), None)
        if chosen is None:
            raise KubectlError(f"error: context was not found for specified context: {name}")
        api_client = config.new_client_from_config(
            config_file=files, context=name, persist_config=False
        )
    except ConfigException as exc:
        raise KubectlError(f"error: {exc}") from None
    namespace = (chosen.get("context") or {}).get("namespace") or "default"
    return Connection(api_client, namespace, options.request_timeout)


def _kubeconfig_files(explicit: str | None, environ: Mapping[str, str]) -> str | None:
    """The kubeconfig path(s) to load, joined with os.pathsep; None when there is none."""
    if explicit:
        if not Path(explicit).expanduser().is_file():
            raise KubectlError(f"error: stat {explicit}: no such file or directory")
        return str(Path(explicit).expanduser())
    listed = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    candidates = listed or [str(Path(environ.get("HOME", "~")) / ".kube" / "config")]
    existing = [str(Path(p).expanduser()) for p in candidates if Path(p).expanduser().is_file()]
    if existing:
        return os.pathsep.join(existing)
    if "KUBERNETES_SERVICE_HOST" in environ:
        return None
    raise KubectlError(
        "error: no configuration has been provided: no kubeconfig at "
        f"{os.pathsep.join(candidates)} (set KUBECONFIG or pass --kubeconfig)"
    )


def _in_cluster(options: ConnectionOptions) -> Connection:
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except ConfigException as exc:
        raise KubectlError(f"error: {exc}") from None
    try:
        namespace = _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        namespace = "default"
    return Connection(client.ApiClient(configuration), namespace, options.request_timeout)


def server_error(exc: ApiException) -> KubectlError:
    """`Error from server (NotFound): workloads.kueue.x-k8s.io "x" not found`, as kubectl
    prints an API `Status`; 401 and TLS failures read like kubectl's `error:` lines."""
    status = status_of(exc.body)
    if exc.status == 401:
        return KubectlError("error: You must be logged in to the server (Unauthorized)", 401)
    if not exc.status:  # the client reports TLS failures as status 0
        return KubectlError(f"error: {one_line(exc.reason or 'request failed')}")
    reason = status.get("reason") or exc.reason or exc.status
    message = status.get("message") or _plain_body(exc) or exc.reason or "unknown error"
    return KubectlError(f"Error from server ({reason}): {message}", exc.status)


def _plain_body(exc: ApiException) -> str:
    body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else exc.body
    return one_line(body)[:300] if isinstance(body, str) else ""


def transport_error(exc: Exception, server: str, timeout: float | None) -> KubectlError:
    """The server could not be reached: one `error:` line naming it, like kubectl."""
    cause: BaseException = exc
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        cause = exc.reason
    text = str(cause)
    # Checked first: urllib3 2 derives NewConnectionError from ConnectTimeoutError.
    if isinstance(cause, urllib3.exceptions.NameResolutionError):
        host = server.rsplit(":", 1)[0]
        return KubectlError(f"error: dial tcp: lookup {host}: no such host")
    if "refused" in text.lower():
        return KubectlError(
            f"error: the connection to the server {server} was refused - "
            "did you specify the right host or port?"
        )
    if isinstance(cause, (urllib3.exceptions.TimeoutError, TimeoutError)):
        limit = f" within {timeout:g}s" if timeout else ""
        return KubectlError(
            f"error: the server {server} did not answer{limit} (see --request-timeout)"
        )
    detail = text.split(": ", 1)[-1] if ": " in text else text
    return KubectlError(f"error: cannot reach the server {server}: {one_line(detail)}")
