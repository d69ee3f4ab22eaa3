"""Kubernetes' name, label and selector checks, with their messages, as Kueue's webhooks
call them (`k8s.io/apimachinery`: `api/validate/content`, `util/validation`,
`apis/meta/v1/validation`, `api/validation`).

Lengths are counted in bytes (UTF-8), as Go's `len` counts them; patterns must match the
whole value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from api.validation.field_errors import (
    FieldError,
    Path,
    forbidden,
    invalid,
    required,
    too_long,
)

__all__ = [
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_value",
    "is_qualified_name",
    "validate_annotations",
    "validate_domain_prefixed_path",
    "validate_label_name",
    "validate_label_selector",
    "validate_labels",
]

_LABEL_KEY_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_ERR: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character"
)
_LABEL_VALUE_FMT: Final = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE_ERR: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)
_DNS_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_ERR: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS_SUBDOMAIN_FMT: Final = _DNS_LABEL_FMT + "(\\." + _DNS_LABEL_FMT + ")*"
_DNS_SUBDOMAIN_ERR: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_HTTP_PATH_FMT: Final = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"

_LABEL_KEY: Final = re.compile(_LABEL_KEY_FMT)
_LABEL_VALUE: Final = re.compile(_LABEL_VALUE_FMT)
_DNS_LABEL: Final = re.compile(_DNS_LABEL_FMT)
_DNS_SUBDOMAIN: Final = re.compile(_DNS_SUBDOMAIN_FMT)
_HTTP_PATH: Final = re.compile(_HTTP_PATH_FMT)

LABEL_VALUE_MAX: Final = 63
DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
ANNOTATIONS_SIZE_MAX: Final = 256 * 1024


def _size(text: str) -> int:
    return len(text.encode())


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """`RegexError`: the message, examples and the pattern used."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len_bytes(length: int) -> str:
    return f"must be no more than {length} bytes"


def _max_len_characters(length: int) -> str:
    return f"must be no more than {length} characters"


def is_dns1123_subdomain(value: str, *, bytes_unit: bool = True) -> list[str]:
    """`content.IsDNS1123Subdomain` (`bytes_unit`) or `validation.IsDNS1123Subdomain`
    (their length messages differ)."""
    errors = []
    if _size(value) > DNS1123_SUBDOMAIN_MAX:
        limit = _max_len_bytes if bytes_unit else _max_len_characters
        errors.append(limit(DNS1123_SUBDOMAIN_MAX))
    if not _DNS_SUBDOMAIN.fullmatch(value):
        errors.append(regex_error(_DNS_SUBDOMAIN_ERR, _DNS_SUBDOMAIN_FMT, "example.com"))
    return errors


def is_dns1123_label(value: str) -> list[str]:
    """`content.IsDNS1123Label`."""
    errors = []
    if _size(value) > DNS1123_LABEL_MAX:
        errors.append(_max_len_bytes(DNS1123_LABEL_MAX))
    if not _DNS_LABEL.fullmatch(value):
        if _DNS_SUBDOMAIN.fullmatch(value):
            errors.append("must not contain dots")
        else:
            errors.append(regex_error(_DNS_LABEL_ERR, _DNS_LABEL_FMT, "my-name", "123-abc"))
    return errors


def is_qualified_name(value: str) -> list[str]:
    """`content.IsLabelKey` (= `IsQualifiedName`): an optional DNS subdomain prefix and
    '/', then a name of at most 63 characters."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {message}" for message in is_dns1123_subdomain(prefix))
    else:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif _size(name) > LABEL_VALUE_MAX:
        errors.append("name part " + _max_len_bytes(LABEL_VALUE_MAX))
    if not _LABEL_KEY.fullmatch(name):
        errors.append(
            "name part "
            + regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def is_label_value(value: str) -> list[str]:
    """`content.IsLabelValue`: empty, or at most 63 label characters."""
    errors = []
    if _size(value) > LABEL_VALUE_MAX:
        errors.append(_max_len_bytes(LABEL_VALUE_MAX))
    if not _LABEL_VALUE.fullmatch(value):
        errors.append(
            regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errors


def validate_label_name(name: str, path: Path, rule: str = "") -> list[FieldError]:
    """`ValidateLabelName`: a qualified name."""
    return [invalid(path, name, message, rule) for message in is_qualified_name(name)]


def validate_labels(labels: Mapping[str, Any], path: Path, rule: str = "") -> list[FieldError]:
    """`ValidateLabels`: every key a qualified name, every value a label value (both
    reported at `path`, as Kubernetes does)."""
    errors = []
    for key, value in labels.items():
        errors.extend(validate_label_name(str(key), path, rule))
        text = "" if value is None else str(value)
        errors.extend(invalid(path, text, message, rule) for message in is_label_value(text))
    return errors


def validate_annotations(
    annotations: Mapping[str, Any], path: Path, rule: str = ""
) -> list[FieldError]:
    """`ValidateAnnotations`: keys are qualified names (case aside), 256 KiB in all."""
    errors: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        errors.extend(
            invalid(path, str(key), message, rule)
            for message in is_qualified_name(str(key).lower())
        )
        total += _size(str(key)) + _size("" if value is None else str(value))
    if total > ANNOTATIONS_SIZE_MAX:
        errors.append(too_long(path, ANNOTATIONS_SIZE_MAX, rule))
    return errors


def validate_label_selector(selector: Any, path: Path, rule: str = "") -> list[FieldError]:
    """`ValidateLabelSelector` with default options: matchLabels are labels; each
    requirement has a known operator, values exactly when In/NotIn, a qualified key and
    label values."""
    if not isinstance(selector, Mapping):
        return []
    errors = validate_labels(_mapping(selector.get("matchLabels")), path.child("matchLabels"), rule)
    for i, requirement in enumerate(_sequence(selector.get("matchExpressions"))):
        if not isinstance(requirement, Mapping):
            continue
        at = path.child("matchExpressions").index(i)
        operator = requirement.get("operator")
        values = [str(v) for v in _sequence(requirement.get("values"))]
        if operator in ("In", "NotIn"):
            if not values:
                errors.append(
                    required(
                        at.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                        rule,
                    )
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errors.append(
                    forbidden(
                        at.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                        rule,
                    )
                )
        else:
            errors.append(
                invalid(
                    at.child("operator"), str(operator or ""), "not a valid selector operator", rule
                )
            )
        errors.extend(validate_label_name(str(requirement.get("key") or ""), at.child("key"), rule))
        for j, value in enumerate(values):
            errors.extend(
                invalid(at.child("values").index(j), value, message, rule)
                for message in is_label_value(value)
            )
    return errors


def validate_domain_prefixed_path(path: Path, value: str, rule: str = "") -> list[FieldError]:
    """`IsDomainPrefixedPath`: `host/path` with a DNS subdomain host (Kubernetes checks a
    Job's `spec.managedBy` so)."""
    if not value:
        return [required(path, "", rule)]
    host, slash, rest = value.partition("/")
    if not slash or not host or not rest:
        return [
            invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")', rule)
        ]
    errors = [
        invalid(path, host, message, rule)
        for message in is_dns1123_subdomain(host, bytes_unit=False)
    ]
    if not _HTTP_PATH.fullmatch(rest):
        errors.append(invalid(path, rest, regex_error("Invalid path", _HTTP_PATH_FMT), rule))
    return errors


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: Any) -> Iterable[Any]:
    return value if isinstance(value, list) else ()
