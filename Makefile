# gpuroute: the two commands of the README.
#   make demo   - make .venv, install the package (with the OSM reader the README's examples use), compile the
#                 server's kernels into numba's cache (gpuroute warmup), route on NY
#   make test   - make .venv, install with test extras, compile every .cu with nvcc (if present), lint, run the suite
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: demo test lint cu-check osrm-bin web-assets chromium clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[osm,crp,serve]'
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.installed web-assets
	$(VENV)/bin/gpuroute warmup
	$(VENV)/bin/gpuroute route
	@echo "(the command is $(VENV)/bin/gpuroute; or: source $(VENV)/bin/activate)"

cu-check:
	@bash .ci/compile_cu.sh

# osrm-extract/contract/routed for the differential test against OSRM (the osrm-bindings wheel, in .venv/osrm/)
osrm-bin:
	@bash .ci/fetch_osrm.sh >/dev/null

# Leaflet, leaflet-routing-machine and leaflet-geoman-free for the web page of gpuroute serve (npm pack, pinned, into .venv/web/)
web-assets:
	@bash .ci/fetch_web.sh >/dev/null

# Debian's chromium for the browser test of that page (apt-get, only when missing)
chromium:
	@bash .ci/install_chromium.sh

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check src tests benchmarks

test: $(VENV)/.installed-dev cu-check osrm-bin web-assets chromium
	$(VENV)/bin/ruff check src tests benchmarks
	$(PY) -m pytest -q --durations=25

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
