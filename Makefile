# quotagate — the obvious targets. `make test` is what CI runs (.ci/run).
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all venv lint typecheck crds manifests unit test bench bench-compare demo cluster-up cluster-down cluster-binaries clean image host-packages e2e-real-node

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
	$(PY) -m controller.integrations.framework.manifests charts/quotagate/files/integrations.yaml

# config/default/quotagate.yaml: the chart rendered with its defaults.
manifests: cluster-binaries
	$(PY) -m tools.chart > config/default/quotagate.yaml

unit: $(STAMP)
	$(PY) -m pytest tests/unit -q

cluster-binaries: $(STAMP)
	$(PY) -m tests.cluster build
	$(PY) -m tests.cluster modules

# The Debian packages the image and the real node need (apt-get as root; nothing to do
# when they are there): tests/cluster/host_packages.py.
host-packages: $(STAMP)
	$(PY) -m tests.cluster host-packages

# dist/quotagate-<version>.oci.tar, from Debian's and PyPI's packages (image/), loaded into
# a local podman or docker if there is one.
image: $(STAMP)
	$(PY) -m tests.cluster host-packages --for image
	$(PY) -m image

# Lint, types, then every test: unit, integration and e2e against the real local control
# plane, the real node's among them.
test: lint typecheck cluster-binaries host-packages
	$(PY) -m pytest -q

# The real node's tests alone: the image, the kubelet, the chart and a Job on it.
e2e-real-node: cluster-binaries host-packages
	$(PY) -m pytest -q tests/e2e/test_real_node.py

bench: $(STAMP)
	$(PY) -m pytest tests/bench -q -s

# Kueue's minimalkueue, then quotagate, each on a fresh local control plane, driven by the
# same live run of SCENARIO: one table with both and their ratio (docs/benchmark.md).
SCENARIO ?= tools/bench/scenarios/baseline.yaml
OUT      ?= .bench-compare
bench-compare: $(STAMP)
	$(PY) -m tools.bench.compare --minimalkueue "$(MINIMALKUEUE)" --kueue-crds "$(KUEUE_CRDS)" --out "$(OUT)" "$(SCENARIO)"

# KUBELET=1 adds a real node (containerd and a kubelet) with quotagate's image.
cluster-up: cluster-binaries $(if $(KUBELET),host-packages)
	$(PY) -m tests.cluster up $(if $(KUBELET),--kubelet)

cluster-down: $(STAMP)
	$(PY) -m tests.cluster down

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# The narrated tour on a local control plane (leaves it running; `make cluster-down` ends it).
demo: cluster-binaries
	$(PY) -m tools.demo
