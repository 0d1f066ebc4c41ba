"""Example envs shipped with evo, each registered with gymnasium when its module is imported: name one
as ``--env-id evo.examples.<module>:<EnvId>`` (every rank imports the module, which registers it)."""
