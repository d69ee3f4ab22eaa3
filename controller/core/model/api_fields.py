"""Reading fields of an API object (a dict) with their paths, collecting every problem.

Used by `from_api`: instead of stopping at the first bad field, each accessor records
`(field path, message)` and returns a harmless default, so a tool can report them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from api.quantities import InvalidQuantity, Quantity
from controller.core.model.selectors import InvalidSelector, LabelSelector, Requirement
from controller.core.model.workloads import Toleration

__all__ = ["FieldReader", "parse_time"]

T = TypeVar("T")


def parse_time(text: str) -> float:
    """RFC 3339 → seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class FieldReader:
    """Walks one object, recording every problem with its field path."""

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def obj(self, obj: Any, path: str) -> Mapping[str, Any]:
        if obj is None:
            return {}
        if not isinstance(obj, Mapping):
            self.problem(path, f"expected an object, got {type(obj).__name__}")
            return {}
        return obj

    def seq(self, obj: Any, path: str) -> list[Any]:
        if obj is None:
            return []
        if not isinstance(obj, list):
            self.problem(path, f"expected a list, got {type(obj).__name__}")
            return []
        return obj

    def text(self, obj: Any, path: str, default: str | None = None) -> str:
        if obj is None:
            if default is None:
                self.problem(path, "required")
                return ""
            return default
        if not isinstance(obj, str):
            self.problem(path, f"expected a string, got {obj!r}")
            return ""
        return obj

    def integer(self, obj: Any, path: str, default: int | None = None) -> int | None:
        if obj is None:
            return default
        if isinstance(obj, bool) or not isinstance(obj, int):
            self.problem(path, f"expected an integer, got {obj!r}")
            return default
        return int(obj)

    def quantity(self, obj: Any, path: str) -> int:
        try:
            value = Quantity.parse(obj).milli
        except InvalidQuantity as exc:
            self.problem(path, str(exc))
            return 0
        if value < 0:
            self.problem(path, f"must not be negative, got {obj!r}")
            return 0
        return value

    def quantities(self, obj: Any, path: str) -> dict[str, int]:
        return {
            str(name): self.quantity(value, f"{path}.{name}")
            for name, value in self.obj(obj, path).items()
        }

    def labels(self, obj: Any, path: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.obj(obj, path).items()}

    def enum(self, obj: Any, path: str, choices: Callable[[str], T], default: T) -> T:
        if obj is None:
            return default
        try:
            return choices(obj)
        except ValueError:
            self.problem(path, f"unsupported value {obj!r}")
            return default

    def time(self, obj: Any, path: str) -> float | None:
        if obj is None:
            return None
        try:
            return parse_time(str(obj))
        except ValueError:
            self.problem(path, f"not an RFC 3339 time: {obj!r}")
            return None

    def requirements(self, obj: Any, path: str) -> tuple[Requirement, ...]:
        out = []
        for i, expr in enumerate(self.seq(obj, path)):
            expr = self.obj(expr, f"{path}[{i}]")
            values = tuple(str(v) for v in self.seq(expr.get("values"), f"{path}[{i}].values"))
            try:
                out.append(
                    Requirement(
                        self.text(expr.get("key"), f"{path}[{i}].key"),
                        self.text(expr.get("operator"), f"{path}[{i}].operator"),
                        values,
                    )
                )
            except InvalidSelector as exc:
                self.problem(f"{path}[{i}]", str(exc))
        return tuple(out)

    def selector(self, obj: Any, path: str) -> LabelSelector | None:
        if obj is None:
            return None
        spec = self.obj(obj, path)
        try:
            return LabelSelector(
                self.labels(spec.get("matchLabels"), f"{path}.matchLabels"),
                self.requirements(spec.get("matchExpressions"), f"{path}.matchExpressions"),
            )
        except InvalidSelector as exc:
            self.problem(f"{path}.matchExpressions", str(exc))
            return None

    def tolerations(self, obj: Any, path: str) -> tuple[Toleration, ...]:
        out = []
        for i, item in enumerate(self.seq(obj, path)):
            t = self.obj(item, f"{path}[{i}]")
            out.append(
                Toleration(
                    str(t.get("key") or ""),
                    str(t.get("operator") or "Equal"),
                    str(t.get("value") or ""),
                    str(t.get("effect") or ""),
                    self.integer(t.get("tolerationSeconds"), f"{path}[{i}].tolerationSeconds"),
                )
            )
        return tuple(out)
