"""The real KubeRay operator beside the local control plane, and the one part of Ray it
talks to, played by a stand-in.

`KubeRayOperator` runs `ray-operator` of `github.com/ray-project/kuberay/ray-operator`
(built from its Go module: tests/cluster/modules.py) after installing the module's CRDs: its
RayCluster, RayJob and RayService controllers are KubeRay's own, creating the head and
worker pods, the head Service and the submitter Job, suspending, resuming and deleting them.

What no process here can be is Ray itself: the fake nodes run no containers
(tests/cluster/nodes.py plays the kubelet). KubeRay asks the Ray head's dashboard, over
HTTP, how a Ray job is doing (`GET /api/jobs/<submission id>`), stops it when its RayJob is
deleted (`POST /api/jobs/<id>/stop`) and, in `HTTPMode`, submits it (`POST /api/jobs/`).
`RayDashboard` answers those requests as a Ray head's job server does: the operator's
`http.Client` (KubeRay's own, with Go's default transport) is pointed at it by `HTTP_PROXY`,
because the head Service's DNS name (`<cluster>-head-svc.<namespace>.svc.cluster.local`)
resolves nowhere on this host; every request keeps the host it was meant for. A test plays
the submitter pod's `ray job submit` (`submit`: the Ray job exists once the submitter pod
runs) and the Ray job's end (`finish`, then it completes the submitter pod as the
submitter exits when the job ends).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client

from tests.cluster.controlplane import free_port
from tests.cluster.modules import ModuleDir, ensure_module

__all__ = ["KubeRayOperator", "RayDashboard", "RayJobRecord"]

JOBS_PATH = "/api/jobs/"
TERMINAL = ("STOPPED", "SUCCEEDED", "FAILED")


@dataclass
class RayJobRecord:
    """One Ray job as the dashboard's job table keeps it (Ray's `JobDetails`)."""

    submission_id: str
    host: str
    status: str = "RUNNING"
    message: str = ""
    entrypoint: str = ""
    start_time: int = field(default_factory=lambda: int(time.time() * 1000))
    end_time: int = 0

    def info(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "job_id": self.submission_id,
            "submission_id": self.submission_id,
            "status": self.status,
            "message": self.message,
            "entrypoint": self.entrypoint,
            "start_time": self.start_time,
        }
        if self.end_time:
            body["end_time"] = self.end_time
        return body


class RayDashboard:
    """The Ray job REST API of every Ray head, as an HTTP proxy would see its requests
    (see the module docstring). `requests` lists (method, host, path) as they came."""

    def __init__(self) -> None:
        self.port = free_port()
        self.jobs: dict[str, RayJobRecord] = {}
        self.requests: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RayDashboard:
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                url = urlsplit(self.path)  # absolute: the request went through a proxy
                length = int(self.headers.get("Content-Length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}") if length else {}
                status, body = dashboard.handle(method, url.netloc, url.path, payload)
                self._answer(status, body)

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def handle(self, method: str, host: str, path: str, payload: dict[str, Any]) -> tuple[int, Any]:
        """Ray's job API: get, list, submit, stop, delete."""
        with self._lock:
            self.requests.append((method, host, path))
            if not path.startswith(JOBS_PATH):
                return 404, {"error": f"no such path {path}"}
            rest = path[len(JOBS_PATH) :].strip("/")
            if method == "GET" and not rest:
                return 200, [job.info() for job in self.jobs.values() if job.host == host]
            if method == "POST" and not rest:
                submission_id = str(payload.get("submission_id") or f"raysubmit_{len(self.jobs)}")
                self.jobs[submission_id] = RayJobRecord(
                    submission_id, host, "RUNNING", entrypoint=str(payload.get("entrypoint", ""))
                )
                return 200, {"job_id": submission_id, "submission_id": submission_id}
            job_id, _, action = rest.partition("/")
            job = self.jobs.get(job_id)
            if job is None:
                return 404, {"error": f"Job {job_id} does not exist"}
            if method == "GET" and not action:
                return 200, job.info()
            if method == "POST" and action == "stop":
                stopped = job.status not in TERMINAL
                if stopped:
                    job.status, job.end_time = "STOPPED", int(time.time() * 1000)
                return 200, {"stopped": stopped}
            if method == "DELETE" and not action:
                del self.jobs[job_id]
                return 200, {"deleted": True}
            return 405, {"error": f"{method} {path}"}

    def submit(self, submission_id: str, host: str, entrypoint: str = "") -> None:
        """What the submitter pod's `ray job submit --submission-id …` does: the Ray job
        runs on the head `host`."""
        with self._lock:
            self.jobs[submission_id] = RayJobRecord(submission_id, host, entrypoint=entrypoint)

    def finish(self, submission_id: str, status: str = "SUCCEEDED", message: str = "") -> None:
        """The Ray job ends (`SUCCEEDED`, `FAILED` or `STOPPED`)."""
        with self._lock:
            job = self.jobs[submission_id]
            job.status, job.message = status, message
            job.end_time = int(time.time() * 1000)

    def polled(self, submission_id: str) -> list[str]:
        """The hosts KubeRay asked about the Ray job `submission_id`."""
        with self._lock:
            return [
                host
                for method, host, path in self.requests
                if method == "GET" and path.rstrip("/") == f"{JOBS_PATH}{submission_id}"
            ]


class KubeRayOperator:
    """KubeRay's `ray-operator` as a subprocess (see the module docstring)."""

    def __init__(self, kubeconfig: str, workdir: Path, dashboard: RayDashboard) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.dashboard = dashboard
        self.module: ModuleDir = ensure_module("kuberay")
        self.health_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "kuberay-operator.log"

    def start(self, api_client: client.ApiClient, timeout: float = 60) -> KubeRayOperator:
        from tests.cluster.fixtures import install_crds

        install_crds(api_client, self.module.crds)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                str(self.module.binary),
                "--metrics-addr",
                "0",
                f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
                "--enable-leader-election=false",
                "--log-stdout-encoder",
                "console",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={
                **os.environ,
                "KUBECONFIG": self.kubeconfig,
                "HTTP_PROXY": self.dashboard.proxy_url,
                "http_proxy": self.dashboard.proxy_url,
                "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost",
            },
            start_new_session=True,
        )
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the KubeRay operator exited: {self.log()[-2000:]}")
            with contextlib.suppress(OSError), opener.open(url, timeout=2) as answer:
                if answer.status == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(
            f"the KubeRay operator was not ready in {timeout}s: {self.log()[-2000:]}"
        )

    def stop(self, timeout: float = 15) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
