"""Environment ids: which exist, which are Procgen games, and close matches for typos.

Pure apart from reading gymnasium's registry; it neither imports procgen nor creates an env.
"""

from __future__ import annotations

import difflib
import importlib

# The 16 games of procgen 0.10 (procgen.env.ENV_NAMES), kept here so that validating an
# id does not import procgen (which imports the old `gym` and prints a warning).
PROCGEN_GAMES = (
    "bigfish",
    "bossfight",
    "caveflyer",
    "chaser",
    "climber",
    "coinrun",
    "dodgeball",
    "fruitbot",
    "heist",
    "jumper",
    "leaper",
    "maze",
    "miner",
    "ninja",
    "plunder",
    "starpilot",
)
DISTRIBUTION_MODES = ("easy", "hard", "extreme", "memory", "exploration")


def procgen_game(env_id: str) -> str | None:
    """The Procgen game named by ``env_id`` (``bigfish``, ``procgen:bigfish``,
    ``procgen-bigfish-v0``, ``procgen:procgen-bigfish-v0``), or None if it names none."""
    name = env_id.split(":", 1)[1] if env_id.startswith("procgen:") else env_id
    if name.startswith("procgen-") and name.endswith("-v0"):
        name = name[len("procgen-") : -len("-v0")]
    return name if name in PROCGEN_GAMES else None


def gymnasium_ids() -> list[str]:
    import gymnasium

    return sorted(gymnasium.envs.registry.keys())


def unknown_env_message(env_id: str) -> str | None:
    """None if ``env_id`` can be made, else a message with close matches."""
    if procgen_game(env_id) is not None:
        return None
    if ":" in env_id and not env_id.startswith("procgen:"):
        # gymnasium's "module:EnvId" form: importing the module registers the env.
        module = env_id.split(":", 1)[0]
        try:
            importlib.import_module(module)
        except ImportError as error:
            return f"--env-id {env_id!r}: cannot import module {module!r} ({error})"
        env_id = env_id.split(":", 1)[1]
    known = gymnasium_ids()
    if env_id in known:
        return None
    candidates = known + list(PROCGEN_GAMES)
    bare = env_id.split(":", 1)[-1]
    matches = difflib.get_close_matches(bare, candidates, n=5, cutoff=0.6)
    matches += [c for c in candidates if c.lower() == bare.lower() and c not in matches]
    hint = f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
    return (
        f"--env-id {env_id!r} is neither a registered gymnasium env nor a Procgen game.{hint} "
        f"Procgen games: {', '.join(PROCGEN_GAMES)}."
    )
