"""Reading back what ``--tracker`` wrote, through the tracker's own files or client, and checking it against the
run's records (tests/unit/runner/test_tracked_runs.py in process, tests/e2e/test_tracked_runs.py under mpiexec)."""

import json
from pathlib import Path

import yaml

from tests.support import mlflow_client, read_lineage, wandb_history, wandb_records

HPARAMS = ("learning_rate", "ent_coef", "clip_range", "gamma", "gae_lambda", "vf_coef")
"""The hyperparameters the built-in PPO search space explores: each a tracked row's ``hparams/<name>``."""


def tracked_rows(run_dir: Path, tracker: str, members: int) -> tuple[dict[int, list[dict]], list[list], list[str]]:
    """What the tracker holds of the run, read through its own files or client: each member's rows in the
    order taken (W&B: its history rows; MLflow: its metrics gathered by step), the population's last lineage
    table, and the files of the population's exported agent."""
    run_id = yaml.safe_load((run_dir / "config.yaml").read_text())["run_id"]
    if tracker == "wandb":
        folder = run_dir / "wandb"
        rows = {m: wandb_history(folder, f"{run_id}-member-{m}") for m in range(members)}
        population = wandb_records(folder, f"{run_id}-population")
        tables = [row["lineage/path"] for row in wandb_history(folder, f"{run_id}-population")]
        # the last table logged, looked for in every start's offline run (its name holds its content's hash; its
        # content is checked below): a stop and a resume within one second once shared a folder (evo waits that out
        # now: evo/tracking/wandb_runs.py after_last_start)
        found = sorted(folder.glob(f"offline-run-*-{run_id}-population*/files/{tables[-1]}"))
        assert found, f"no offline run holds {tables[-1]}"
        table = json.loads(found[-1].read_text())
        artifacts = [r.artifact for r in population if r.WhichOneof("record_type") == "artifact"]
        artifact = [artifact for artifact in artifacts if artifact.type == "model"][-1]  # tables are artifacts too
        files = [entry.path for entry in artifact.manifest.contents]
        return rows, table["data"], files
    client = mlflow_client(run_dir)
    (experiment,) = client.search_experiments()
    runs = {run.data.tags["evo.key"]: run for run in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {*(f"member-{m}" for m in range(members)), "population"}
    assert {run.info.status for run in runs.values()} == {"FINISHED"}
    rows = {}
    for m in range(members):
        run = runs[f"member-{m}"].info.run_id
        by_step: dict[int, dict] = {}
        for name in runs[f"member-{m}"].data.metrics:
            for metric in client.get_metric_history(run, name):
                row = by_step.setdefault(metric.step, {})
                assert name not in row, f"member {m}: {name} at step {metric.step} logged twice"
                row[name] = metric.value
        rows[m] = [by_step[step] for step in sorted(by_step)]
    population = runs["population"].info.run_id
    table = json.loads(Path(client.download_artifacts(population, "lineage.json", str(run_dir.parent))).read_text())
    files, folders = [], ["agent"]
    while folders:
        for item in client.list_artifacts(population, folders.pop()):
            (folders if item.is_dir else files).append(item.path)
    return rows, table["data"], files


def assert_tracked_once(run_dir: Path, tracker: str, population: list[dict], env: str = "HangingCartPole-v0") -> None:
    """Each member's generations in its tracked run once each (those of ``population``, population.csv's rows
    when the tracker took them), with their rows' score, hyperparameters and donor; the lineage table holds
    lineage.jsonl, which has an exploit; the exported agent's zips (``env``'s) are the population's artifact."""
    recorded = {(int(row["member"]), int(row["generation"])): row for row in population}
    members, table, files = tracked_rows(run_dir, tracker, len({member for member, _ in recorded}))
    for member, rows in members.items():
        generations = sorted(generation for m, generation in recorded if m == member)
        tracked = [row["generation"] for row in rows]
        assert tracked == generations, f"member {member}: tracked {tracked}, population.csv {generations}"
        for row in rows:
            csv_row = recorded[(member, row["generation"])]
            assert row["score"] == float(csv_row["score"])
            assert {name: row[f"hparams/{name}"] for name in HPARAMS} == {
                name: float(csv_row[name]) for name in HPARAMS
            }
            assert row.get("exploit/donor") == (float(csv_row["donor"]) if csv_row["donor"] else None)
            assert row["exploited"] == (1 if csv_row["donor"] else 0)
    copies = [(row["recipient"], row["donor"]) for row in read_lineage(run_dir) if row["donor"] != row["recipient"]]
    assert copies, "the test must reach an exploit"
    assert [json.loads(row[-1]) for row in table] == read_lineage(run_dir)
    assert {f"{env}.zip", "best_model.zip", "config.yml"} <= {Path(name).name for name in files}
