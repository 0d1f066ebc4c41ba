"""``--exploit-test welch`` under mpiexec: 4 members on 2 ranks (the tests decided on rank 0 from both ranks'
gathered outcomes), each test in the lineage and in TensorBoard, and the run's final pick (``--final-eval``)
what evo-export takes. The test's arithmetic and gate:
tests/unit/core/test_welch.py; both modes, a refusing run and the ready records in process:
tests/unit/runner/test_welch_runs.py; the final pick with the test on, stopped and resumed:
tests/unit/runner/test_final_runs.py."""

import json

from tests.e2e.runs import scalar_tags
from tests.support import TINY_DEFAULT, assert_tested, budget, mpiexec, read_lineage, write_hyperparams


def test_a_welch_run_on_two_ranks_records_its_tests_and_exports_its_final_pick(tmp_path):
    from evo.tools.saved import choose, open_run

    run_dir = tmp_path / "run"
    tiny = write_hyperparams(tmp_path, TINY_DEFAULT)
    argv = ["pbt_rl_truct.py", *budget(4, 3, 256), "--hyperparams", str(tiny), "--seed", "3"]
    argv += ["--exploit-test", "welch", "--exploit-alpha", "0.2", "--final-eval", "3", "--final-top", "2"]
    result = mpiexec(2, [*argv, "--run-dir", str(run_dir), "--progress-interval", "0"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    tested = assert_tested(read_lineage(run_dir), 0.2)
    assert tested and "Welch's t-test against member" in result.stdout
    accumulator, tags = scalar_tags(run_dir / "tb" / "population")
    assert {"pbt/welch_tests", "pbt/welch_copies"} <= tags
    assert sum(event.value for event in accumulator.Scalars("pbt/welch_tests")) == len(tested)
    copied = sum(line["welch"]["copied"] for line in tested)
    assert sum(event.value for event in accumulator.Scalars("pbt/welch_copies")) == copied
    record = json.loads((run_dir / "final.json").read_text())
    assert choose(open_run(run_dir)).member == record["pick"]["member"]
