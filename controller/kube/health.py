"""`/healthz` and `/readyz` for the kubelet's probes.

- `/healthz`: 200 while the process's event loop answers (liveness).
- `/readyz`: 200 once every readiness check has passed — the Workload informer has listed,
  and (when enabled) the webhook is serving with its certificate — else 503 with the checks
  still waiting, one per line (readiness: the webhook Service only sends to ready pods).
"""

from __future__ import annotations

import logging

from aiohttp import web

from controller.kube.fatal import FatalError

__all__ = ["Readiness", "serve_health"]

log = logging.getLogger(__name__)


class Readiness:
    """Named checks that start failing and pass once (`mark`)."""

    def __init__(self, *checks: str) -> None:
        self.waiting: set[str] = set(checks)

    def require(self, check: str) -> None:
        self.waiting.add(check)

    def mark(self, check: str) -> None:
        self.waiting.discard(check)

    @property
    def ready(self) -> bool:
        return not self.waiting


async def serve_health(address: str, port: int, readiness: Readiness) -> web.AppRunner | None:
    """Serve the probes on `address:port` (port 0 = off); returns the runner to clean up."""
    if not port:
        return None

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        if readiness.ready:
            return web.Response(text="ok\n")
        waiting = "".join(f"waiting: {check}\n" for check in sorted(readiness.waiting))
        return web.Response(status=503, text=waiting)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, address, port).start()
    except OSError as exc:
        await runner.cleanup()
        raise FatalError(
            f"cannot serve the health probes on {address}:{port}: {exc.strerror or exc} "
            "(healthPort, --health-port; 0 turns them off)"
        ) from None
    log.info("health probes on http://%s:%d/healthz and /readyz", address, port)
    return runner
