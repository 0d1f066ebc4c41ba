# evo: `make run` trains a small PBT population, `make test` runs every test tier.
# Both install first (into .venv) if needed. Optional extras: make install EXTRAS=mujoco
# (gymnasium's MuJoCo tasks); `make test EXTRAS=mujoco` also runs the tests that need them.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?=
comma := ,
# pip's extras: dev, and EXTRAS (comma-separated) if given
PIP_EXTRAS := dev$(if $(strip $(EXTRAS)),$(comma)$(strip $(EXTRAS)))
# one stamp per set of extras, so that asking for another set installs it
STAMP := $(VENV)/.installed-stamp-$(subst $(comma),-,$(PIP_EXTRAS))
RANKS ?= 4
ARGS ?=
PYTEST_ARGS ?=

# Open MPI refuses to start as root unless told; we only set this when you are root.
ifeq ($(shell id -u),0)
MPI_ENV := OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
endif

.PHONY: install run toy plot compare test test-fast lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml scripts/system-deps.sh
	bash scripts/system-deps.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first and pinned: any other version pulls gigabytes of CUDA wheels
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[$(PIP_EXTRAS)]'
	touch $@

run: install
	$(MPI_ENV) $(BIN)/mpiexec -n $(RANKS) --oversubscribe $(BIN)/python pbt_rl_truct.py \
		--env-id CartPole-v1 --eval-episodes 10 --select-on test $(ARGS)

# the PBT paper's toy: four variants, a table of final Q and toy.png (seconds)
toy: install
	$(MPI_ENV) $(BIN)/mpiexec -n 2 --oversubscribe $(BIN)/python pbt_toy.py $(ARGS)

# PNGs of a run's scores, hyperparameter schedules and lineage: make plot RUN=runs/...
plot: install
	@test -n "$(RUN)" || { echo "usage: make plot RUN=runs/<run dir>"; exit 2; }
	$(BIN)/python -m evo.plot $(RUN) $(ARGS)

# PBT, PBT-WTA, PB2, random search and one default agent on CartPole-v1 and Acrobot-v1,
# 3 seeds (~30 min on 2 cores): runs/compare/{results.md,results.json,compare.png}
compare: install
	$(MPI_ENV) $(BIN)/python experiments/compare.py $(ARGS)

test: install
	$(MPI_ENV) $(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: install
	$(BIN)/python -m pytest -m "not mpi and not e2e and not slurm and not multinode" $(PYTEST_ARGS)

bench: install
	mkdir -p bench/results
	$(MPI_ENV) $(BIN)/python bench/exchange.py --json bench/results/exchange.json
	$(BIN)/python bench/throughput.py --json bench/results/throughput.json
	$(MPI_ENV) $(BIN)/python bench/overhead.py --json bench/results/overhead.json
	$(MPI_ENV) $(BIN)/python bench/controlplane.py --json bench/results/controlplane.json

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
