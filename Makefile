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
# smoke/tiny never touch a hub; paper scale downloads unless the caller sets these (compute
# nodes without internet: pre-download on a login node, then export both, see README)
ifneq ($(SCALE),paper)
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
endif

.PHONY: browser install reproduce readme-numbers readme-check test test-fast paper-standin gpu-check lint dryrun plan slurm-up slurm-down bench envs clean-results

install: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || $(SYSPY) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c requirements.lock -e .
	@touch $@

reproduce: install
	snakemake --cores $(CORES) --config scale=$(SCALE)
	@echo "report: reports/$(SCALE)/index.html"
	@if [ "$(SCALE)" = tiny ]; then $(MAKE) --no-print-directory readme-numbers; fi

# the results tables in methods/<paper>/README.md (between <!-- claims:tiny --> markers), from
# results/$(SCALE)/<paper>/claims.json; readme-check fails when one is out of date
readme-numbers: install
	$(PY) -m methods.core readme --scale $(SCALE)

readme-check: install
	$(PY) -m methods.core readme --scale $(SCALE) --check

# make test: the whole suite, SLURM included (starts a single-node cluster; needs root).
test: install slurm-up browser
	REQUIRE_SLURM=1 $(PY) -m pytest --durations=10

test-fast: install
	$(PY) -m pytest -m "not slurm and not workflow and not paper_path"

# on a CUDA machine: device, stand-in paper path of wd_plasticity and lfq on the GPU, trainer MFU,
# compiled Triton kernels; one JSON in build/gpu-check/gpu_check.json
gpu-check: install
	$(PY) scripts/gpu_check.py

# every paper's paper-scale DAG on local stand-ins of its hub models and datasets (CPU)
paper-standin: install
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PY) -m pytest -m paper_path tests/paper_path -rA

# the workflow (snakemake's linter) and the Python (ruff: pyflakes, import order, a complexity cap;
# settings in pyproject.toml) and the rule files' format (snakefmt, [tool.snakefmt])
lint: install
	snakemake --lint
	ruff check .
	snakefmt --check Snakefile workflow/

dryrun: install
	for s in smoke tiny paper; do snakemake -n --quiet rules --config scale=$$s || exit 1; done

# GPU-hours of the jobs still to run at SCALE (make plan SCALE=paper): the sizing notes and the
# table the dry run prints after its job list (methods/core/plan.py, methods/core/resources.py)
plan: install
	set -o pipefail; snakemake -n --quiet rules --config scale=$(SCALE) | sed -n '/^GPU sizing/p; /^GPU-hour plan/,$$p'

# headless Chromium for the report's layout test (tests/core/test_report_browser.py); apt, as root
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

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
