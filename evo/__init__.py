"""evo: MPI-distributed Population Based Training for Stable-Baselines3 PPO."""

__version__ = "0.1.0"
