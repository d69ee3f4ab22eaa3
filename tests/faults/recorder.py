"""Every change etcd makes to the Workloads, pods and Jobs of a fault scenario, in revision
order: the exact history the invariants are checked on (tests/faults/replay.py).

A watch on the API server cannot give it: a restarted API server refuses to resume an old
watch (410 Gone) and a re-list shows only where things ended up. etcd keeps every revision
until it is compacted, so this watches etcd itself (its JSON gateway, `/v3/watch`) from the
revision the scenario starts at, and after etcd restarts resumes from the revision after
the last one it saw: nothing is missed. The scenario's API server stores objects as JSON
(`--storage-media-type=application/json`), so pods and Jobs can be read here too.
Compacting etcd would lose history only below what was seen (`Faults.compact_etcd` is
given `revision`).
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["Change", "EtcdRecorder"]

# etcd key prefix → kind of object, as kube-apiserver stores them.
PREFIXES = {
    "/registry/kueue.x-k8s.io/workloads/": "Workload",
    "/registry/pods/": "Pod",
    "/registry/jobs/": "Job",
}


@dataclass(frozen=True)
class Change:
    """One write to one object: its new content, or None when it was deleted."""

    revision: int
    kind: str
    namespace: str
    name: str
    obj: dict[str, Any] | None


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class EtcdRecorder:
    """Records, in a background thread, the changes to the Workloads, pods and Jobs of
    `namespaces` from `start_revision` on."""

    def __init__(self, etcd_url: str, namespaces: set[str], start_revision: int) -> None:
        self.host = etcd_url.split("//", 1)[1]
        self.namespaces = namespaces
        self.changes: list[Change] = []
        self.revision = start_revision - 1  # the last revision seen (of any key)
        self.reconnects = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._connection: http.client.HTTPConnection | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="etcd-recorder")

    def start(self) -> EtcdRecorder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._connection is not None:
            self._connection.close()
        self._thread.join(5)

    def wait_for(self, revision: int, timeout: float = 60.0) -> None:
        """Until every change up to `revision` has been recorded."""
        deadline = time.monotonic() + timeout
        while self.revision < revision:
            if self.error:
                raise AssertionError(f"the etcd recorder failed: {self.error}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the etcd recorder saw revision {self.revision}, not {revision}, "
                    f"after {timeout:.0f}s"
                )
            time.sleep(0.05)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch()
            except (OSError, http.client.HTTPException, ValueError, AttributeError):
                # AttributeError: http.client's reader after `stop` closed the connection
                if self._stop.is_set():
                    return
                self.reconnects += 1
                time.sleep(0.2)  # etcd is down or restarting: resume from where we were

    def _watch(self) -> None:
        connection = http.client.HTTPConnection(self.host, timeout=None)
        self._connection = connection
        request = {
            "create_request": {
                "key": _b64("/registry/"),
                "range_end": _b64("/registry0"),  # every key under /registry/
                "start_revision": str(self.revision + 1),
            }
        }
        connection.request(
            "POST", "/v3/watch", json.dumps(request), {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        if response.status != 200:
            raise OSError(f"etcd watch answered {response.status}")
        while line := response.readline():
            result = json.loads(line).get("result") or {}
            if result.get("compact_revision") or result.get("canceled"):
                self.error = f"the watch from revision {self.revision + 1} was cancelled: {result}"
                self._stop.set()
                return
            for event in result.get("events") or ():
                self._record(event)

    def _record(self, event: dict[str, Any]) -> None:
        kv = event["kv"]
        revision = int(kv["mod_revision"])
        key = base64.b64decode(kv["key"]).decode()
        for prefix, kind in PREFIXES.items():
            if key.startswith(prefix):
                namespace, _, name = key[len(prefix) :].partition("/")
                if namespace in self.namespaces:
                    deleted = event.get("type") == "DELETE"
                    obj = None if deleted else json.loads(base64.b64decode(kv["value"]))
                    self.changes.append(Change(revision, kind, namespace, name, obj))
                break
        self.revision = max(self.revision, revision)
