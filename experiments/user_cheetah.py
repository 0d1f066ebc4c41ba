"""HalfCheetah-v5 under a name evo's hyperparameter files do not know, for the study of a user without tuned
settings (experiments/studies/untuned.yml; docs/results.md, "A user without tuned settings"):

    --env-id experiments.user_cheetah:UserCheetah-v5

is gymnasium's HalfCheetah-v5 (the same MuJoCo model, reward and 1000-step episodes; the mujoco extra), but no
block of hyperparams/ppo.yml is keyed by its id, so a run of it takes the ``default`` block's settings and search
space, as an env of the user's own does, not zoo's tuned HalfCheetah-v5 entry.
"""

import gymnasium as gym

ID = "UserCheetah-v5"

if ID not in gym.envs.registry:
    gym.register(ID, entry_point="gymnasium.envs.mujoco.half_cheetah_v5:HalfCheetahEnv", max_episode_steps=1000)
