"""``--explore casmo`` (BG-PBT's trust-region BO) in a real run under mpiexec, and its --resume."""

import json

import pytest
import yaml

from evo.core.explorers.casmo import LENGTH_INIT, TrustRegion
from evo.core.kinds import kind_from_spec
from tests.e2e.test_pb2_runs import pb2_run
from tests.support import last_manifest, read_lineage, read_population


def casmo_state(run_dir):
    explorer = last_manifest(run_dir)["explorer"]
    assert explorer["name"] == "casmo"
    return explorer["state"]


def test_casmo_explores_in_its_trust_region_and_resumes(tmp_path, tiny_hyperparams):
    run_dir = tmp_path / "run"
    result = pb2_run(run_dir, "pbt_rl_truct.py", tiny_hyperparams, 2, "--explore", "casmo")
    assert "(casmo explore)" in result.stdout
    before = casmo_state(run_dir)
    assert [t for t, _, _ in before["observations"]] == [2] * 4  # generation 1's changes are not measured
    assert before["region"]["length"] == LENGTH_INIT and len(before["proposed"]) == 1
    result = pb2_run(run_dir, "pbt_rl_truct.py", tiny_hyperparams, 4, "--resume")  # no --explore: kept
    assert "(casmo explore)" in result.stdout
    after = casmo_state(run_dir)
    assert after["observations"][:4] == before["observations"]
    assert [t for t, _, _ in after["observations"][4:]] == [3] * 4 + [4] * 4
    space = {
        name: kind_from_spec(spec)
        for name, spec in yaml.safe_load((run_dir / "config.yaml").read_text())["agent"]["search_space"].items()
    }
    rows = {(int(r["generation"]), int(r["member"])): r for r in read_population(run_dir)}
    lineage = read_lineage(run_dir)
    assert [e["generation"] for e in lineage] == [1, 2, 3, 4]  # one recipient a generation (4 members)
    for exploit in lineage:
        marker = "(casmo warm-up)" if exploit["generation"] == 1 else "(casmo)"
        assert all(marker in change for change in exploit["changes"]), exploit["changes"]
        donor = rows[(exploit["generation"], exploit["donor"])]
        for name, kind in space.items():  # inside the bounds and the box around the donor's values
            new = exploit["new_hparams"][name]
            assert kind.contains(new), (name, new)
            distance = abs(kind.to_unit(new) - kind.to_unit(kind.parse(donor[name])))
            assert distance <= LENGTH_INIT / 2 + 1e-6, (name, new, donor[name])
        if exploit["generation"] < 4:  # the recipient trains with what casmo chose
            row = rows[(exploit["generation"] + 1, exploit["recipient"])]
            assert {k: kind.parse(row[k]) for k, kind in space.items()} == pytest.approx(exploit["new_hparams"])
    # the region counted generations 3 and 4 (the first after the resume, from the checkpoint's
    # proposed member): a success when the member casmo proposed for the generation scored best
    expected = TrustRegion()
    for generation in (3, 4):
        proposed = next(e["recipient"] for e in lineage if e["generation"] == generation - 1)
        best = max(float(rows[(generation, m)]["score"]) for m in range(4))
        expected.record(float(rows[(generation, proposed)]["score"]) >= best)
        saved = json.loads((run_dir / "checkpoints" / f"gen_{generation:06d}" / "manifest.json").read_text())
        assert saved["explorer"]["state"]["region"] == vars(expected), generation
