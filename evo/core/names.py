"""How an env id is written in file and folder names (run directories, a study's run folders, logs and
floors). Pure."""


def file_name(env_id: str) -> str:
    """``env_id`` as a part of a file or folder name: ``ALE/Pong-v5`` as ``ALE_Pong-v5`` and a user's
    ``module:EnvId`` as ``module_EnvId`` (no folder level of its own, no colon)."""
    return env_id.replace("/", "_").replace(":", "_")
