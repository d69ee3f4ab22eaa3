"""The informers (controller/kube/informer.py) against the real API server: the pods and
Jobs the integrations manage are selected by the server, so a replica never streams the
cluster's other pods (issue 18); a refusal that will not heal (403) is fatal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client

from api.constants import QUEUE_NAME_LABEL
from controller.kube.client import PODS, make_api_client
from controller.kube.fatal import FatalError
from controller.kube.informer import Informer


class Recorder:
    def __init__(self) -> None:
        self.seen: dict[str, str | None] = {}

    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        self.seen[f"{meta['namespace']}/{meta['name']}"] = event_type

    def known_keys(self) -> set[str]:
        return set(self.seen)


def _pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def test_only_queue_labelled_pods_are_streamed(
    kubeconfig_path: str, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, _pod("listed", {QUEUE_NAME_LABEL: "lq"}))
    core.create_namespaced_pod(namespace, _pod("other-listed", {"app": "x"}))
    recorder = Recorder()

    async def scenario() -> None:
        api = await make_api_client(kubeconfig_path)
        informer = Informer(api, PODS, recorder, [namespace], label_selector=QUEUE_NAME_LABEL)
        task = asyncio.create_task(informer.run())
        try:
            for _ in range(100):
                if f"{namespace}/listed" in recorder.seen:
                    break
                await asyncio.sleep(0.05)
            # The unlabelled pod first: a watch delivers events in resourceVersion order, so
            # once the labelled one has arrived, an unfiltered event would have too.
            await asyncio.to_thread(
                core.create_namespaced_pod, namespace, _pod("other-watched", {"app": "x"})
            )
            await asyncio.to_thread(
                core.create_namespaced_pod, namespace, _pod("watched", {QUEUE_NAME_LABEL: "lq"})
            )
            for _ in range(100):
                if f"{namespace}/watched" in recorder.seen:
                    break
                await asyncio.sleep(0.05)
        finally:
            task.cancel()
            await api.close()

    asyncio.run(scenario())
    assert set(recorder.seen) == {f"{namespace}/listed", f"{namespace}/watched"}


def test_a_forbidden_watch_is_fatal(
    kubeconfig_path: str, api_client: client.ApiClient, namespace: str, tmp_path: Any
) -> None:
    import yaml

    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token = core.create_namespaced_service_account_token(
        "nobody", namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token
    with open(kubeconfig_path) as stream:
        kubeconfig = yaml.safe_load(stream)
    kubeconfig["users"] = [{"name": "nobody", "user": {"token": token}}]
    kubeconfig["contexts"][0]["context"]["user"] = "nobody"
    path = tmp_path / "nobody.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))

    async def scenario() -> None:
        api = await make_api_client(str(path))
        try:
            await asyncio.wait_for(Informer(api, PODS, Recorder()).run(), 30)
        finally:
            await api.close()

    with pytest.raises(FatalError, match="not allowed to list/watch pods: 403"):
        asyncio.run(scenario())
