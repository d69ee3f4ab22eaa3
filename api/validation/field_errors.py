"""Field errors as Kubernetes reports them (`k8s.io/apimachinery/pkg/util/validation/field`).

A `FieldError` prints exactly as `field.Error.Error()` does, e.g.
`spec.resourceGroups[0].coveredResources[1]: Duplicate value: "cpu"` or
`spec.nodeLabels: Invalid value: "a b": a valid label must be ...`, and a list of them
joins as `field.ErrorList.ToAggregate()` does: one error alone, several as `[a, b]` with
repeats left out. Kueue's webhooks answer with that text, so quotagate's answers read the
same.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

__all__ = [
    "OMIT_VALUE",
    "ErrorType",
    "FieldError",
    "Path",
    "aggregate",
    "duplicate",
    "forbidden",
    "invalid",
    "not_found",
    "not_supported",
    "quote",
    "required",
    "rule_failed",
    "too_long",
]


class ErrorType(StrEnum):
    """`field.ErrorType`, printed as its `String()`."""

    NOT_FOUND = "Not found"
    REQUIRED = "Required value"
    DUPLICATE = "Duplicate value"
    INVALID = "Invalid value"
    NOT_SUPPORTED = "Unsupported value"
    FORBIDDEN = "Forbidden"
    TOO_LONG = "Too long"
    TOO_MANY = "Too many"


# The types whose message never shows the value (`ErrorBody`).
_VALUELESS: Final = frozenset({ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG})


class _Omitted:
    """`field.OmitValueType`: an error that shows no value."""


OMIT_VALUE: Final = _Omitted()


class Path:
    """A field path, built as `field.Path` builds one: `spec.podSets[0].name`,
    `metadata.annotations[kueue.x-k8s.io/admission-gated-by]`; the root prints as `<nil>`.
    A plain slotted class: the rules make one for most fields they look at."""

    __slots__ = ("text",)

    def __init__(self, text: str = "") -> None:
        self.text = text

    def child(self, *names: str) -> Path:
        text = self.text
        for name in names:
            text = f"{text}.{name}" if text else name
        return Path(text)

    def index(self, i: int) -> Path:
        return Path(f"{self.text}[{i}]")

    def key(self, key: str) -> Path:
        return Path(f"{self.text}[{key}]")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Path) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Path({self.text!r})"

    def __str__(self) -> str:
        return self.text or "<nil>"


def quote(text: str) -> str:
    """Go's `%q` of a string (`strconv.Quote`), for the ASCII and printable text API
    values are: double quotes, with backslash, quote and control characters escaped."""
    out = ['"']
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char == "\r":
            out.append("\\r")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _render(value: object) -> str:
    """How `ErrorBody` prints a bad value: simple types plainly, strings quoted, anything
    else as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class FieldError:
    """One invalid field: where, what kind of error, the bad value and why."""

    type: ErrorType
    path: Path
    value: object = OMIT_VALUE
    detail: str = ""
    rule: str = field(default="", compare=False)
    """Which rule found it, for the docs and the tests (docs/validation.md)."""

    def body(self) -> str:
        """`ErrorBody()`: the message without the field path."""
        text = self.type.value
        if self.type not in _VALUELESS and not isinstance(self.value, _Omitted):
            text = f"{text}: {_render(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"


def aggregate(errors: Iterable[FieldError]) -> str:
    """`ErrorList.ToAggregate().Error()`: one message, several as `[a, b]`, repeats once."""
    messages = list(dict.fromkeys(str(error) for error in errors))
    if len(messages) == 1:
        return messages[0]
    return "[" + ", ".join(messages) + "]"


def rule_failed(path: Path, message: str, rule: str) -> FieldError:
    """A CRD rule (`x-kubernetes-validations`) that failed, as the API server reports it:
    `Invalid value` with the rule's message and no value."""
    return FieldError(ErrorType.INVALID, path, OMIT_VALUE, message, rule)


def invalid(path: Path, value: object, detail: str, rule: str = "") -> FieldError:
    return FieldError(ErrorType.INVALID, path, value, detail, rule)


def required(path: Path, detail: str = "", rule: str = "") -> FieldError:
    return FieldError(ErrorType.REQUIRED, path, "", detail, rule)


def forbidden(path: Path, detail: str, rule: str = "") -> FieldError:
    return FieldError(ErrorType.FORBIDDEN, path, "", detail, rule)


def duplicate(path: Path, value: object, rule: str = "", detail: str = "") -> FieldError:
    return FieldError(ErrorType.DUPLICATE, path, value, detail, rule)


def not_found(path: Path, value: object, rule: str = "") -> FieldError:
    return FieldError(ErrorType.NOT_FOUND, path, value, "", rule)


def not_supported(
    path: Path, value: object, supported: Iterable[str], rule: str = ""
) -> FieldError:
    values = ", ".join(quote(str(v)) for v in supported)
    return FieldError(
        ErrorType.NOT_SUPPORTED, path, value, f"supported values: {values}" if values else "", rule
    )


def too_long(path: Path, max_length: int, rule: str = "") -> FieldError:
    unit = "byte" if max_length == 1 else "bytes"
    return FieldError(
        ErrorType.TOO_LONG, path, "", f"may not be more than {max_length} {unit}", rule
    )
