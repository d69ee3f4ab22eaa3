# quotagate — the obvious targets. `make test` is what CI runs (.ci/run).
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all venv lint typecheck crds manifests unit test bench bench-compare demo cluster-up cluster-down cluster-binaries clean

all: test

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (quotagate needs Python >= 3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy

crds: $(STAMP)
	$(PY) -m api.crdgen config/crd/bases
	rm -f charts/quotagate/crds/*.yaml && cp config/crd/bases/*.yaml charts/quotagate/crds/

# config/default/quotagate.yaml: the chart rendered with its defaults.
manifests: cluster-binaries
	$(PY) -m tests.cluster render-chart > config/default/quotagate.yaml

unit: $(STAMP)
	$(PY) -m pytest tests/unit -q

cluster-binaries: $(STAMP)
	$(PY) -m tests.cluster build

# Lint, types, then every test: unit, integration and e2e against the real local control plane.
test: lint typecheck cluster-binaries
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m pytest tests/bench -q -s

# Kueue's minimalkueue, then quotagate, each on a fresh local control plane, driven by the
# same live run of SCENARIO: one table with both and their ratio (docs/benchmark.md).
SCENARIO ?= tests/bench/scenarios/baseline.yaml
OUT      ?= .bench-compare
# Seconds into each run at which kube-apiserver is killed and started again, e.g. "60 120".
APISERVER_RESTARTS ?=
bench-compare: $(STAMP)
	$(PY) -m tests.bench.compare --minimalkueue "$(MINIMALKUEUE)" --kueue-crds "$(KUEUE_CRDS)" --out "$(OUT)" $(foreach t,$(APISERVER_RESTARTS),--restart-apiserver-at $(t)) "$(SCENARIO)"

cluster-up: cluster-binaries
	$(PY) -m tests.cluster up

cluster-down: $(STAMP)
	$(PY) -m tests.cluster down

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# The narrated tour on a local control plane (leaves it running; `make cluster-down` ends it).
demo: cluster-binaries
	$(PY) -m tests.cluster.demo
