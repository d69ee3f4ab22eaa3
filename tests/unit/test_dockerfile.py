"""The image is reproducible: its base pinned by digest, its dependencies by a constraints
file that satisfies pyproject.toml's requirements (issue 18)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def test_the_base_image_is_pinned_by_digest() -> None:
    text = (REPO / "Dockerfile").read_text()
    bases = re.findall(r"^ARG BASE=(\S+)$", text, re.M)
    assert len(bases) == 1 and re.search(r"@sha256:[0-9a-f]{64}$", bases[0]), bases
    assert all(
        line.split()[1] in ("${BASE}", "${BASE}")
        for line in text.splitlines()
        if line.startswith("FROM")
    )
    assert "-c constraints.txt" in text


def test_the_constraints_pin_every_requirement_within_its_range() -> None:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for text in project["dependencies"]:
        requirement = Requirement(text.split("#")[0].strip())
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name]), (name, pins[name])
