# The README's commands. `make demo` and `make test` set everything up on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test test-fast clean

setup: $(VENV)/.installed

# torch first, pinned: guidellm depends on torch, and an unpinned resolve pulls a multi-GB CUDA
# build; 2.13.0 is the CPU build on this machine's disk (elsewhere: the PyTorch CPU index).
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $@

demo: setup
	$(VENV)/bin/farm sweep --grid smoke

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -m "not slow and not vllm_cpu" $(PYTEST_ARGS)

clean:
	rm -rf farm-runs mlflow.db mlruns
