"""What an aggregated API server owes the cluster (Kubernetes' "delegated" authentication
and authorization, as Kueue's visibility server gets them from k8s.io/apiserver):

- **Authentication.** kube-apiserver proxies a request with a client certificate signed by
  its front-proxy CA and the caller's identity in headers (`X-Remote-User`,
  `X-Remote-Group`, `X-Remote-Extra-*`). Both are published in the ConfigMap
  `kube-system/extension-apiserver-authentication` (`requestheader-client-ca-file`,
  `requestheader-allowed-names`, the header names). A request whose TLS client certificate
  that CA did not sign, or whose common name is not an allowed one, is refused (401): the
  identity headers are believed only from the aggregator.
- **Authorization.** Discovery (`/apis`, `/apis/<group>`, `/apis/<group>/<version>`) is
  open to every authenticated caller, as Kubernetes' `system:discovery` role grants; a
  resource request is asked of the API server with a SubjectAccessReview for the caller
  (cached 10 s allowed, 10 s denied, as k8s.io/apiserver's delegating authorizer), so RBAC
  decides as Kueue's ClusterRoles say. kube-apiserver has already authorized it too.
"""

from __future__ import annotations

import json
import logging
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from kubernetes.aio import client as aio_client

__all__ = [
    "AUTHENTICATION_CONFIGMAP",
    "Authorizer",
    "Caller",
    "FrontProxy",
    "load_front_proxy",
]

log = logging.getLogger(__name__)

AUTHENTICATION_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")
_CACHE_SECONDS = 10.0


@dataclass(frozen=True)
class Caller:
    """Who kube-apiserver says is asking."""

    user: str
    groups: tuple[str, ...]
    uid: str
    extra: Mapping[str, tuple[str, ...]]


def _list(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """A ConfigMap value written as a JSON list of strings (kube-apiserver's format)."""
    if not text:
        return default
    try:
        value = json.loads(text)
    except ValueError:
        return default
    return tuple(str(v) for v in value) if isinstance(value, list) else default


@dataclass(frozen=True)
class FrontProxy:
    """The aggregator's client CA and request headers (the ConfigMap's requestheader-*)."""

    client_ca: str  # PEM
    allowed_names: tuple[str, ...]
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    uid_headers: tuple[str, ...] = ()
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> FrontProxy:
        ca = data.get("requestheader-client-ca-file")
        if not ca:
            raise ValueError(
                "kube-system/extension-apiserver-authentication has no "
                "requestheader-client-ca-file: kube-apiserver runs without the aggregation "
                "layer (--requestheader-client-ca-file, --proxy-client-cert-file)"
            )
        return cls(
            client_ca=ca,
            allowed_names=_list(data.get("requestheader-allowed-names"), ()),
            username_headers=_list(data.get("requestheader-username-headers"), ("X-Remote-User",)),
            group_headers=_list(data.get("requestheader-group-headers"), ("X-Remote-Group",)),
            uid_headers=_list(data.get("requestheader-uid-headers"), ()),
            extra_prefixes=_list(
                data.get("requestheader-extra-headers-prefix"), ("X-Remote-Extra-",)
            ),
        )

    def tls_context(self) -> ssl.SSLContext:
        """A server context that asks for a client certificate and verifies it against the
        front-proxy CA only (no system CAs)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=self.client_ca)
        return context

    def caller(self, peer_cert: Mapping[str, Any] | None, headers: Mapping[str, str]) -> Caller:
        """The caller of a request, or ValueError (→ 401) when it did not come through the
        aggregator. `peer_cert` is the verified client certificate (ssl's getpeercert())."""
        if not peer_cert:
            raise ValueError("no client certificate signed by the front-proxy CA")
        names = [
            value
            for rdn in peer_cert.get("subject", ())
            for key, value in rdn
            if key == "commonName"
        ]
        if self.allowed_names and not set(names) & set(self.allowed_names):
            raise ValueError(f"client certificate {names} is not one of the allowed names")
        user = next((headers[h] for h in self.username_headers if headers.get(h)), "")
        if not user:
            raise ValueError("no user in the request headers")
        groups = tuple(value for h in self.group_headers for value in _header_values(headers, h))
        uid = next((headers[h] for h in self.uid_headers if headers.get(h)), "")
        extra: dict[str, tuple[str, ...]] = {}
        for name in headers:
            for prefix in self.extra_prefixes:
                if name.lower().startswith(prefix.lower()):
                    key = _unescape(name[len(prefix) :].lower())
                    extra[key] = (*extra.get(key, ()), *_header_values(headers, name))
        return Caller(user, groups, uid, extra)


def _header_values(headers: Mapping[str, str], name: str) -> list[str]:
    getall = getattr(headers, "getall", None)
    if getall is not None:
        return list(getall(name, []))
    value = headers.get(name)
    return [value] if value else []


def _unescape(key: str) -> str:
    """Extra keys are percent-encoded in header names (k8s.io/apiserver's headerrequest)."""
    return unquote(key)


async def load_front_proxy(api_client: aio_client.ApiClient) -> FrontProxy:
    namespace, name = AUTHENTICATION_CONFIGMAP
    configmap: Any = await aio_client.CoreV1Api(api_client).read_namespaced_config_map(
        name, namespace
    )
    return FrontProxy.from_configmap(configmap.data or {})


class Authorizer:
    """SubjectAccessReviews for resource requests, with k8s.io/apiserver's cache."""

    def __init__(self, api_client: aio_client.ApiClient) -> None:
        self.api = aio_client.AuthorizationV1Api(api_client)
        self._cache: dict[tuple[Any, ...], tuple[float, bool, str]] = {}

    async def allowed(self, caller: Caller, attributes: Mapping[str, str]) -> tuple[bool, str]:
        """Whether `caller` may do what `attributes` (a SubjectAccessReview's
        resourceAttributes) say, and the API server's reason."""
        key = (
            caller.user,
            caller.groups,
            caller.uid,
            tuple(sorted((k, v) for k, v in caller.extra.items())),
            tuple(sorted(attributes.items())),
        )
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]
        body: Any = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": caller.user,
                "groups": list(caller.groups),
                "uid": caller.uid or None,
                "extra": {k: list(v) for k, v in caller.extra.items()} or None,
                "resourceAttributes": dict(attributes),
            },
        }
        review: Any = await self.api.create_subject_access_review(body)
        status = review.status
        allowed = bool(status and status.allowed and not status.denied)
        reason = (status.reason or "") if status else ""
        if len(self._cache) > 10_000:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        self._cache[key] = (now + _CACHE_SECONDS, allowed, reason)
        return allowed, reason
