"""The root of every kind: apiVersion, kind, metadata, and how its CRD is named and printed."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field, ValidationError, field_validator

from api.common import KueueModel, ObjectMeta
from api.constants import API_VERSION

__all__ = ["CRDNames", "InvalidObjectError", "KueueObject", "PrinterColumn", "Scope"]


class Scope(StrEnum):
    CLUSTER = "Cluster"
    NAMESPACED = "Namespaced"


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """One `additionalPrinterColumns` entry (what `kubectl get` shows)."""

    name: str
    json_path: str
    type: str = "string"
    priority: int = 0

    def to_dict(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "jsonPath": self.json_path, "type": self.type}
        if self.priority:
            column["priority"] = self.priority
        return column


AGE_COLUMN = PrinterColumn("Age", ".metadata.creationTimestamp", "date")
# Columns beyond Kueue's own appear only with `kubectl get -o wide` (priority 1).
WIDE_AGE_COLUMN = PrinterColumn("Age", ".metadata.creationTimestamp", "date", priority=1)


@dataclass(frozen=True, slots=True)
class CRDNames:
    """How a kind is served: names, scope and printer columns of its CRD."""

    plural: str
    singular: str
    scope: Scope
    short_names: tuple[str, ...] = ()
    # Kueue's CRDs declare no column for some kinds: kubectl then shows NAME and AGE.
    printer_columns: tuple[PrinterColumn, ...] = ()


class InvalidObjectError(ValueError):
    """An API object that does not validate; `problems` lists `(field path, message)`."""

    def __init__(self, kind: str, name: str, problems: list[tuple[str, str]]) -> None:
        self.kind = kind
        self.name = name
        self.problems = problems
        lines = "; ".join(f"{path or '<root>'}: {message}" for path, message in problems)
        super().__init__(f"invalid {kind} {name!r}: {lines}")

    @classmethod
    def from_validation_error(
        cls, kind: str, name: str, error: ValidationError
    ) -> InvalidObjectError:
        problems = []
        for item in error.errors(include_url=False):
            path = "".join(
                f"[{part}]" if isinstance(part, int) else f".{part}" for part in item["loc"]
            ).lstrip(".")
            message = str(item["msg"]).removeprefix("Value error, ")
            problems.append((path, message))
        return cls(kind, name, problems)


class KueueObject(KueueModel):
    """A top-level object of the `kueue.x-k8s.io/v1beta2` API."""

    CRD: ClassVar[CRDNames]

    api_version: str = API_VERSION
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @field_validator("api_version")
    @classmethod
    def _check_api_version(cls, value: str) -> str:
        if value != API_VERSION:
            raise ValueError(f"apiVersion must be {API_VERSION!r}, got {value!r}")
        return value

    @field_validator("kind")
    @classmethod
    def _check_kind(cls, value: str) -> str:
        expected = cls.model_fields["kind"].default
        if value != expected:
            raise ValueError(f"kind must be {expected!r}, got {value!r}")
        return value

    def to_dict(self, *, exclude_unset: bool = False) -> dict[str, Any]:
        """Kubernetes JSON; `apiVersion` and `kind` are always present and come first."""
        body = super().to_dict(exclude_unset=exclude_unset)
        body.pop("apiVersion", None)
        body.pop("kind", None)
        return {"apiVersion": self.api_version, "kind": self.kind, **body}
