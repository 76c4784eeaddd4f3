# icml26-repro. Every target creates .venv when it is missing and installs the pinned deps.
SHELL      := /bin/bash
VENV       ?= .venv
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
CORES      ?= all
SCALE      ?= tiny
SYSPY      ?= python3
export PATH := $(abspath $(VENV))/bin:$(PATH)
# one torch thread per Snakemake core; OpenMP/BLAS pools follow suit
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1

.PHONY: install reproduce test test-fast lint dryrun slurm-up slurm-down bench envs clean-results

install: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || $(SYSPY) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c requirements.lock -e .
	@touch $@

reproduce: install
	snakemake --cores $(CORES) --config scale=$(SCALE)
	@echo "report: reports/$(SCALE)/index.html"

# make test: the whole suite, SLURM included (starts a single-node cluster; needs root).
test: install slurm-up
	REQUIRE_SLURM=1 $(PY) -m pytest --durations=10

test-fast: install
	$(PY) -m pytest -m "not slurm and not workflow"

lint: install
	snakemake --lint

dryrun: install
	for s in smoke tiny paper; do snakemake -n --quiet rules --config scale=$$s || exit 1; done

slurm-up:
	bash scripts/slurm-local.sh start

slurm-down:
	bash scripts/slurm-local.sh stop

envs:
	$(PY) scripts/gen_envs.py

bench: install
	$(PY) benchmarks/trainer.py

clean-results:
	rm -rf results reports .snakemake
