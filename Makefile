# The DDP notebook series. Every target sets itself up from nothing:
#   make handouts   execute every lesson with papermill, export offline HTML to build/handouts/
#   make test       the whole test suite (what CI runs)
#   make lab        JupyterLab in notebooks/, with this environment's bin/ on PATH
#                   (EDITION=zh-Hant or zh-Hans: first writes the Chinese notebooks NN_slug.zh-Hant.ipynb beside the
#                   English ones, from translations/, and opens lesson 00 of that edition)
#   make bench      measurements outside the notebooks (lessons 07 and 11; build/bench/), and lesson 07's timing claims
#   make soak       launch every script 50 times in a row; count unclean exits
#   make gpu-check  on a machine with NVIDIA GPUs: every script and lesson on NCCL, report in build/gpu-check/
#                   (QUICK=1: every script once, about 7 min on one GPU; builds no venv, installs nothing)
#   make clean-notebooks  strip outputs and widget state saved from JupyterLab (commit lessons clean)
#
# Options: NPROC=4 (processes per launch), PARAMS="epochs=3 seed=1" (any lesson parameter),
#          FORCE=1 (re-execute even when cached), TORCH_SPEC=torch==2.15.0 (another torch: every target
#          installs it when the installed torch does not satisfy it, tools/torch_spec.py; a bare
#          TORCH_SPEC=torch installs the newest). Pass it on every call, or export it.

PYTHON     ?= python3
VENV       ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN        := $(abspath $(VENV))/bin
READY      := $(VENV)/.ready
MACHINE_PATH := $(PATH)
export PATH := $(BIN):$(PATH)

RUNNER_ARGS := $(if $(NPROC),-p nproc_per_node=$(NPROC)) $(foreach p,$(PARAMS),-p $(p)) $(if $(FORCE),--force)

.PHONY: handouts test lab bench soak gpu-check clean-notebooks clean env

handouts: env
	$(BIN)/python tools/slurm_cluster.py install
	$(BIN)/python tools/series.py build $(RUNNER_ARGS)

test: env
	$(BIN)/python tools/ensure_browser.py
	$(BIN)/python tools/slurm_cluster.py install
	rm -rf build/test
	$(BIN)/python -m pytest

lab: env
	$(if $(EDITION),$(BIN)/python tools/translations.py notebooks --edition $(EDITION))
	cd notebooks && $(BIN)/jupyter lab $(if $(EDITION),00_setup.$(EDITION).ipynb)

# Measurements, then lesson 07 with its timing claims asserted (check_timings=True): run it on a quiet
# machine. make test and make handouts never assert on wall-clock time.
bench: env
	$(BIN)/python tools/bench.py $(if $(NPROC),--nproc $(NPROC))
	$(BIN)/python tools/series.py build --only 07 --force --out build/bench/lesson -p check_timings=True $(RUNNER_ARGS)

# 50 launches in a row of every script: an unclean exit that happens 1 time in 10 shows up here.
soak: env
	$(BIN)/python tools/soak.py --runs 50

# Every script and lesson on this machine's GPUs, with NCCL (tools/gpu_check.py; without CUDA it says so
# and exits 0). QUICK=1: every script once; GPU_CHECK_OUT=DIR: the report's folder. It builds no venv and
# installs nothing. It runs with GPU_PYTHON if set, else with the first of $(VENV)'s python and the
# machine's python3 whose torch (>= 2.10) sees CUDA, else with the first whose torch is >= 2.10 (which
# then says "no CUDA here"); without any, it says in one line how to run the check without make.
TORCH_OK := import sys, torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); sys.exit(v < (2, 10))
CUDA_OK  := import sys, torch; sys.exit(not torch.cuda.is_available())
GPU_PYTHONS = $(or $(GPU_PYTHON),$(BIN)/python $(shell PATH='$(MACHINE_PATH)' command -v python3))
GPU_CHECK_ARGS := $(if $(QUICK),--quick) $(if $(NPROC),--nproc $(NPROC)) $(if $(GPU_CHECK_OUT),--out $(GPU_CHECK_OUT))

gpu-check:
	@py=; for want in cuda torch; do for p in $(GPU_PYTHONS); do \
	  [ -z "$$py" ] && [ -x "$$p" ] && "$$p" -c '$(TORCH_OK)' 2>/dev/null || continue; \
	  [ $$want = torch ] || "$$p" -c '$(CUDA_OK)' 2>/dev/null && py=$$p; \
	done; done; \
	if [ -z "$$py" ]; then echo "make gpu-check: no Python here has torch >= 2.10; run python3 tools/gpu_check.py --quick with the Python that has your CUDA torch (or GPU_PYTHON=/path/to/python make gpu-check)" >&2; exit 2; fi; \
	echo "make gpu-check: $$py tools/gpu_check.py$(if $(strip $(GPU_CHECK_ARGS)), $(strip $(GPU_CHECK_ARGS)))"; \
	exec "$$py" tools/gpu_check.py $(GPU_CHECK_ARGS)

# Lessons are committed without outputs; a lesson saved from JupyterLab is fixed here (test_hygiene.py says so).
clean-notebooks:
	$(PYTHON) tools/clean_notebooks.py

# The torch that TORCH_SPEC names, checked on every call (a fraction of a second when it is there
# already): reinstalled when the installed torch does not satisfy it, or one line says why not.
TORCH_SPEC_CHECK = $(BIN)/python tools/torch_spec.py --retry 'make $(or $(MAKECMDGOALS),handouts)' '$(TORCH_SPEC)'

env: $(READY)
	@$(TORCH_SPEC_CHECK)

# The environment: a venv with TORCH_SPEC's torch first (the CPU build 2.13.0 by default, so the
# range in requirements.txt is already met and pip does not fetch a multi-GB CUDA build), then
# everything else, pinned.
$(READY): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(TORCH_SPEC_CHECK)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

clean:
	-test -x $(BIN)/python && $(BIN)/python tools/slurm_cluster.py stop  # a lesson's cluster lives in build/slurm
	rm -rf build notebooks/runs
