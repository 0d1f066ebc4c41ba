# evo: `make run` trains a small PBT population, `make test` runs the test tiers (all five as root).
# Both install first (into .venv) if needed. Optional extras: make install EXTRAS=mujoco
# (gymnasium's MuJoCo tasks), EXTRAS=atari (Atari games: ale-py with its ROMs, OpenCV),
# EXTRAS=video (--video: pygame-ce, imageio, PyAV; as root also Mesa's EGL), EXTRAS=minigrid (MiniGrid),
# EXTRAS=importance (Optuna, for python -m evo.tools.importance), EXTRAS=onnx (onnx, onnxruntime: evo-export --format onnx),
# EXTRAS=wandb, EXTRAS=mlflow (--tracker wandb|mlflow: W&B, MLflow's client);
# `make test EXTRAS=mujoco,atari,video,minigrid,importance,onnx,wandb,mlflow` also runs the tests that need them.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?=
comma := ,
# pip's extras: dev, and EXTRAS (comma-separated) if given
PIP_EXTRAS := dev$(if $(strip $(EXTRAS)),$(comma)$(strip $(EXTRAS)))
# torch: TORCH=cpu (the default), the CPU wheel from PyTorch's CPU index (TORCH_CPU_INDEX; PyPI's Linux torch is the
# CUDA build, gigabytes more), or TORCH=cuda, the CUDA build of the same version from PyTorch's CUDA index
# (TORCH_CUDA_INDEX; a GPU node's --device cuda needs it: docs/running.md#gpus). scripts/install-torch.sh says which
# build it got, and what to do where the CPU index cannot be reached
TORCH ?= cpu
TORCH_VERSION := 2.13.0
export TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
export TORCH_CUDA_INDEX ?= https://download.pytorch.org/whl/cu128
# one stamp per set of extras (and torch build), so that asking for another installs it
STAMP := $(VENV)/.installed-stamp-$(subst $(comma),-,$(PIP_EXTRAS))$(if $(filter cuda,$(TORCH)),-cuda)
RANKS ?= 4
ARGS ?=
PYTEST_ARGS ?=

# Ray Tune, for `make bench-peers` only: its own virtualenv, never a dependency of evo
RAY_VENV ?= .venv-ray
RAY_STAMP := $(RAY_VENV)/.installed-stamp
RAY_VERSION := 2.60.0
# ray[tune] wants pyarrow, whose newest releases need NumPy 2; 21.0.0 runs with evo's NumPy 1.26
RAY_PYARROW := 21.0.0

# The evo-less virtualenv the export tests play exported agents in (SB3 and rl_zoo3, no evo; evo's
# torch, gymnasium, MuJoCo, SB3 and NumPy versions): built by scripts/zoo-venv.sh, cached
ZOO_VENV ?= .venv-zoo

# The make targets run MPI on this machine, where the bundled Open MPI's libfabric transport
# finds no fabric and then sleeps a second in every rank's MPI_Init: leave it out, unless you set
# OMPI_MCA_btl yourself (README, MPI notes; slurm/ and your own mpiexec lines are not affected).
OMPI_MCA_btl ?= ^ofi
MPI_ENV := OMPI_MCA_btl='$(OMPI_MCA_btl)'
# Open MPI refuses to start as root unless told; we only set this when you are root.
ifeq ($(shell id -u),0)
MPI_ENV += OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
endif

.PHONY: install run toy plot study file-seconds compare compare-continuous compare-bgpbt compare-horizon compare-ties compare-sac compare-learning compare-atari compare-evo-seed compare-untuned compare-procgen compare-procgen-pilot test test-fast lint bench bench-peers zoo-venv clean

install: $(STAMP)

$(STAMP): pyproject.toml scripts/system-deps.sh
	bash scripts/system-deps.sh '$(PIP_EXTRAS)'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first and pinned: any other version pulls gigabytes of CUDA wheels (TORCH=cuda asks for them)
	bash scripts/install-torch.sh $(BIN)/python $(TORCH_VERSION) $(TORCH)
	$(BIN)/python -m pip install --quiet -e '.[$(PIP_EXTRAS)]'
	touch $@

# through evo's launcher: its start-up checks, and Open MPI's banner kept out of a refusal of bad ARGS
run: install
	$(MPI_ENV) $(BIN)/python -m evo.launch -n $(RANKS) --oversubscribe pbt_rl_truct.py \
		--env-id CartPole-v1 --eval-episodes 10 --select-on test $(ARGS)

# the PBT paper's toy: four variants, a table of final Q and toy.png (seconds)
toy: install
	$(MPI_ENV) $(BIN)/mpiexec -n 2 --oversubscribe $(BIN)/python pbt_toy.py $(ARGS)

# PNGs of a run's scores, hyperparameter schedules and lineage: make plot RUN=runs/...
plot: install
	@test -n "$(RUN)" || { echo "usage: make plot RUN=runs/<run dir>"; exit 2; }
	$(BIN)/python -m evo.tools.plot $(RUN) $(ARGS)

# A study of your own (evo-study; docs/results.md says how to write one): make study STUDY=my-study.yml
# [ARGS='--list' | ARGS='--report-only' ...]
study: install
	@test -n "$(STUDY)" || { echo "usage: make study STUDY=<study file> [ARGS=...]"; exit 2; }
	$(MPI_ENV) $(BIN)/python -m evo.study $(STUDY) $(ARGS)

# The built-in studies (experiments/studies/*.yml; experiments/compare.py --study NAME is the same)
# PBT, PBT-WTA, PB2, random search and one default agent on CartPole-v1 and Acrobot-v1,
# 3 seeds (~30 min on 2 cores): runs/compare/{results.md,results.json,compare.png}
compare: install
	$(MPI_ENV) $(BIN)/python -m evo.study experiments/studies/classic.yml $(ARGS)

# PBT, PB2 (mixed space), random search, zoo's tuned agent (at one member's and at a population's
# env steps), rl_zoo3's own train (in .venv-zoo) and SB3's default agent on Pendulum-v1 and
# HalfCheetah-v5, 5 seeds, re-evaluated on fresh episodes (installs the mujoco extra): runs/compare-continuous
compare-continuous:
	$(MAKE) install EXTRAS=mujoco
	$(MAKE) zoo-venv EXTRAS=mujoco
	$(MPI_ENV) $(BIN)/python -m evo.study experiments/studies/continuous.yml $(ARGS)

# BG-PBT (--explore casmo, one stage of distilled architectures) against PBT and PB2 on HalfCheetah-v5,
# 5 seeds at the continuous study's budget, sharing its pbt and pb2 runs (installs the mujoco extra):
# runs/compare-bgpbt
compare-bgpbt:
	$(MAKE) install EXTRAS=mujoco
	$(MPI_ENV) $(BIN)/python -m evo.study experiments/studies/bgpbt.yml $(ARGS)

# The longer horizon (docs/results.md): PBT, random search and one zoo agent at the population's total env steps
# on HalfCheetah-v5, 8 seeds, 196,608 env steps per member (~5 h on 2 cores; installs the mujoco extra)
compare-horizon:
	$(MAKE) install EXTRAS=mujoco
	$(MPI_ENV) $(BIN)/python -m evo.study experiments/studies/horizon.yml $(ARGS)

# the tie rule (--ties explore vs copy) under winner-takes-all and truncation on Acrobot-v1, 5 seeds
compare-ties: install
	$(MPI_ENV) $(BIN)/python -m evo.study experiments/studies/ties.yml $(ARGS)

# SAC (--algo sac): PBT against one agent with zoo's tuned settings on Pendulum-v1, 3 seeds (~1 h 40 min on 2 cores)
compare-sac: install
	$(MPI_ENV) $(BIN)/python -m evo.study experiments/studies/sac.yml $(ARGS)

# Every learner against rl_zoo3's own train (docs/results.md, "Every learner against rl_zoo3"): one evo agent and one
# rl_zoo3 agent (in .venv-zoo) with zoo's settings and budget per learner, 5 seeds, and PBT for A2C, DQN and TQC
# (~4-5 h on 2 cores): runs/learning; then experiments/learning_table.py --replay runs/learning/runs
compare-learning: install
	$(MAKE) zoo-venv
	$(MPI_ENV) PYTHONPATH=docs/examples $(BIN)/python -m evo.study experiments/studies/learning.yml $(ARGS)

# An Atari game learnt: PBT (4 members) against one agent with zoo's settings at the same total env steps, in
# float32 and bfloat16, on ALE/Breakout-v5, ~1M env steps each (~2 h on 2 cores; installs the atari extra)
compare-atari:
	$(MAKE) install EXTRAS=atari
	$(MPI_ENV) $(BIN)/python -m evo.study experiments/studies/atari.yml $(ARGS)

# The EVO seed's experiment on Ant-v5: PBT-PPO with winner-takes-all and truncation against one SAC agent at the same
# total env steps, 3 seeds (~3.5 h on 2 cores, most of it SAC's gradient steps; installs the mujoco extra)
compare-evo-seed:
	$(MAKE) install EXTRAS=mujoco
	$(MPI_ENV) $(BIN)/python -m evo.study experiments/studies/evo-seed.yml $(ARGS)

# A user without tuned settings (docs/results.md): PBT from the default search space, PBT with Welch's exploit test,
# random search and one agent with SB3's defaults at the population's total env steps, on HalfCheetah-v5 as if it
# were the user's own env, 8 seeds (~1.5 h on 2 cores, measured; installs the mujoco extra): runs/untuned
compare-untuned:
	$(MAKE) install EXTRAS=mujoco
	$(MPI_ENV) PYTHONPATH=. $(BIN)/python -m evo.study experiments/studies/untuned.yml $(ARGS)

# Procgen StarPilot: PBT, PB2-Mix (DrAC's aug_type), random search and the paper's default agent over
# the Procgen AutoRL paper's space, NatureCNN, 3 seeds (~3.5 h on 2 cores): runs/compare-procgen
compare-procgen: install
	$(MPI_ENV) $(BIN)/python -m evo.study experiments/studies/procgen.yml $(ARGS)

# The Procgen pilot: one PPO agent (the Procgen study's default) per game, re-evaluated on held-out levels
# with sampled actions at 25/50/75/100 % of 1.57M env steps, against the floors (~2.5 h on 2 cores)
compare-procgen-pilot: install
	$(MPI_ENV) $(BIN)/python -m evo.study experiments/studies/procgen-pilot.yml $(ARGS)

# the tiers in three pytest sessions at once (scripts/test-tiers.sh: slurm and multinode in one, unit, mpi and e2e
# shared by two drawing files from one queue, longest first); with PYTEST_ARGS, one plain pytest session with them
test: install zoo-venv
	$(MPI_ENV) bash scripts/test-tiers.sh $(BIN)/python $(PYTEST_ARGS)

# tests/file-seconds.txt, the order in which make test's sharing sessions take files, from the durations of the
# last make test's two sharing sessions
SHARED_DURATIONS = $(wildcard test-durations-shared-*.txt)
file-seconds:
	@test -f test-durations-shared-1.txt || { echo "no test-durations-shared-*.txt: run make test first"; exit 2; }
	{ head -1 tests/file-seconds.txt; awk '/^# by file, every one:/ {on = 1; next} /^#/ {on = 0} on' \
		$(SHARED_DURATIONS) | sort -rn; } >tests/file-seconds.new && mv tests/file-seconds.new tests/file-seconds.txt

test-fast: install
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

bench: install
	mkdir -p bench/results
	$(MPI_ENV) $(BIN)/python bench/exchange.py --json bench/results/exchange.json
	$(BIN)/python bench/throughput.py --json bench/results/throughput.json
	$(MPI_ENV) $(BIN)/python bench/overhead.py --json bench/results/overhead.json
	$(MPI_ENV) $(BIN)/python bench/controlplane.py --json bench/results/controlplane.json
	$(MPI_ENV) $(BIN)/python bench/replay.py --json bench/results/replay.json
	$(MPI_ENV) $(BIN)/python bench/async_transport.py --json bench/results/async_transport.json
	$(MPI_ENV) $(BIN)/python bench/async_heterogeneous.py --json bench/results/async_heterogeneous.json
	$(MPI_ENV) $(BIN)/python bench/async_runs.py --json bench/results/async_runs.json
	$(BIN)/python bench/augment.py --json bench/results/augment.json

# evo against Ray Tune's PBT (synchronous and asynchronous) on make run's work, with one evo and
# one stock SB3 agent for the ideal; ~25 min on 2 cores: docs/performance.md
bench-peers: install $(RAY_STAMP)
	mkdir -p bench/results
	$(MPI_ENV) $(BIN)/python bench/peers.py --ray-python $(RAY_VENV)/bin/python --json bench/results/peers.json $(ARGS)

# Ray's virtualenv: torch first and pinned (as for evo), then Ray and the same SB3, gymnasium
# and NumPy as evo's .venv, so that both sides train with the same code
$(RAY_STAMP): $(STAMP)
	test -x $(RAY_VENV)/bin/python || $(PYTHON) -m venv $(RAY_VENV)
	$(RAY_VENV)/bin/python -m pip install --quiet --upgrade pip
	bash scripts/install-torch.sh $(RAY_VENV)/bin/python $(TORCH_VERSION) cpu
	$(RAY_VENV)/bin/python -m pip install --quiet 'ray[tune]==$(RAY_VERSION)' pyarrow==$(RAY_PYARROW) \
		$$($(BIN)/python -c 'from importlib.metadata import version as v; \
			print(*(f"{n}=={v(n)}" for n in ("stable-baselines3", "gymnasium", "numpy")))')
	touch $@

zoo-venv: install
	bash scripts/zoo-venv.sh $(ZOO_VENV) $(BIN)/python

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) $(RAY_VENV) $(ZOO_VENV) .pytest_cache .ruff_cache
