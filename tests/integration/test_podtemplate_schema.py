"""The Workload pod template's schema (api/schemas/podtemplatespec.json) is what
api/podtemplate_schema.py makes of the PodTemplateSpec the test API server serves: the
committed file is current for the Kubernetes the tests run."""

from __future__ import annotations

import json

from kubernetes import client

from api.podtemplate_schema import SCHEMA_FILE, generate, render


def test_the_committed_pod_template_schema_is_the_api_servers(
    api_client: client.ApiClient,
) -> None:
    method, url, headers, body, _ = api_client.param_serialize(
        "GET", "/openapi/v3/api/v1", auth_settings=["BearerToken"]
    )
    response = api_client.call_api(method, url, header_params=headers, body=body)
    response.read()
    openapi = json.loads(response.data)
    assert render(generate(openapi)) == SCHEMA_FILE.read_text(encoding="utf-8"), (
        "stale: python -m api.podtemplate_schema <the API server's /openapi/v3/api/v1>"
    )
