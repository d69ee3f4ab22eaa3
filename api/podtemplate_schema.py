"""The structural schema of a Workload's pod template, generated from Kubernetes' own API.

Kueue's Workload CRD carries the whole `corev1.PodTemplateSpec` schema, so an unknown or
misspelt pod field is pruned (or refused under strict field validation) like any other.
quotagate's does the same: `generate` turns the `PodTemplateSpec` of Kubernetes' OpenAPI v3
document for `/api/v1` into a structural CRD schema, and the result is committed as
`api/schemas/podtemplatespec.json` for `api.crdgen` (the CRDs are built without a
cluster). It is regenerated from the API server the tests run
(`tests/integration/test_podtemplate_schema.py` fails when it is stale) or from a file:

    python -m api.podtemplate_schema OPENAPI.json          # write the committed file
    python -m api.podtemplate_schema --check OPENAPI.json  # exit 1 if it is stale

The conversion follows what controller-gen writes for the same Go types: references
inlined; descriptions, patch strategies, unions and enums left out (an enum would refuse a
value a newer Kubernetes adds); a quantity is int-or-string with Kubernetes' pattern, an
IntOrString int-or-string; only the defaults Kubernetes' types declare (not the zero values
of required fields or of nested objects); the template's `metadata` limited to what a pod
template may set (labels, annotations, name, namespace, finalizers).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

from api.quantities import QUANTITY_PATTERN

__all__ = ["SCHEMA_FILE", "generate", "load", "render"]

SCHEMA_FILE: Final = Path(__file__).parent / "schemas" / "podtemplatespec.json"

_ROOT: Final = "io.k8s.api.core.v1.PodTemplateSpec"
_OBJECT_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_QUANTITY: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_TIME: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
# The keys a CRD schema may carry, beyond the structural ones.
_KEPT: Final = frozenset(
    {
        "type",
        "format",
        "required",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
    }
)
_TEMPLATE_META: Final = {
    "type": "object",
    "properties": {
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "name": {"type": "string"},
        "namespace": {"type": "string"},
    },
}


class SchemaSourceError(ValueError):
    """An OpenAPI document without what the pod template schema is made from."""


def _reference(node: Mapping[str, Any]) -> str | None:
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    parts = node.get("allOf")
    if isinstance(parts, list) and len(parts) == 1 and "$ref" in parts[0]:
        return str(parts[0]["$ref"]).rsplit("/", 1)[-1]
    return None


def _convert(node: Mapping[str, Any], schemas: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    name = _reference(node)
    if name is not None:
        if name in seen:
            raise SchemaSourceError(f"recursive schema {name}: no structural form")
        if name == _QUANTITY:
            return {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": QUANTITY_PATTERN,
                "x-kubernetes-int-or-string": True,
            }
        if name == _INT_OR_STRING:
            return {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            }
        if name == _TIME:
            return {"type": "string", "format": "date-time"}
        if name == _OBJECT_META:
            return _TEMPLATE_META
        if name not in schemas:
            raise SchemaSourceError(f"schema {name} is missing from the document")
        # The referring node's own default is the Go zero value of a nested struct
        # (`default: {}`): controller-gen writes none, and neither does quotagate.
        return _convert(schemas[name], schemas, (*seen, name))
    out: dict[str, Any] = {}
    required = set(node.get("required") or ())
    for key, value in node.items():
        if key == "properties":
            out[key] = {
                prop: _property(child, prop in required, schemas, seen)
                for prop, child in sorted(value.items())
            }
        elif key == "items" or (key == "additionalProperties" and isinstance(value, Mapping)):
            out[key] = _convert(value, schemas, seen)
        elif key in _KEPT:
            out[key] = sorted(value) if key == "required" else value
    return out


def _property(
    node: Mapping[str, Any], required: bool, schemas: Mapping[str, Any], seen: tuple[str, ...]
) -> Any:
    converted = _convert(node, schemas, seen)
    default = node.get("default")
    if default is not None and _reference(node) is None and not required and default != {}:
        converted["default"] = default  # a default the type declares (`+default=`)
    return converted


def generate(openapi: Mapping[str, Any]) -> dict[str, Any]:
    """The structural schema of `PodTemplateSpec` from an OpenAPI v3 document of `/api/v1`."""
    try:
        schemas = openapi["components"]["schemas"]
        root = schemas[_ROOT]
    except (KeyError, TypeError):
        raise SchemaSourceError(f"not an OpenAPI v3 document of /api/v1 (no {_ROOT})") from None
    schema: dict[str, Any] = _convert(root, schemas, (_ROOT,))
    schema["description"] = (
        "template is the Pod template: a corev1.PodTemplateSpec (the schema of Kubernetes' "
        "own API)."
    )
    return schema


def render(schema: Mapping[str, Any]) -> str:
    """The committed file's text: sorted keys, one level of indentation, final newline."""
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


@cache
def load() -> dict[str, Any]:
    """The committed schema (a fresh copy is the caller's to keep: do not modify it)."""
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return loaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m api.podtemplate_schema",
        description="Generate the Workload pod template schema from Kubernetes' OpenAPI v3.",
    )
    parser.add_argument("openapi", type=Path, help="OpenAPI v3 document of /api/v1 (JSON)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    try:
        text = render(generate(json.loads(args.openapi.read_text(encoding="utf-8"))))
    except (OSError, ValueError) as exc:
        print(f"python -m api.podtemplate_schema: {exc}", file=sys.stderr)
        return 2
    current = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else None
    if args.check:
        if current != text:
            print(f"{SCHEMA_FILE} is stale: regenerate it", file=sys.stderr)
            return 1
        return 0
    if current != text:
        SCHEMA_FILE.parent.mkdir(parents=True, exist_ok=True)
        SCHEMA_FILE.write_text(text, encoding="utf-8")
        print(f"wrote {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
