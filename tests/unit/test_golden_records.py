"""The golden run's comparison rules (tests/golden.py), without a run: which vendors have records,
what every processor must reproduce, and the vendor read from /proc/cpuinfo. The run itself is
tests/e2e/test_golden.py."""

from tests.golden import GOLDEN, RUNS, cpu_vendor, golden_records, machine_key, portable, read_csv, runs_records


def test_an_unknown_vendor_has_no_records_and_the_known_ones_do():
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm\nCPU implementer\t: 0x41\n"
    assert golden_records(cpu_vendor(arm)) is None
    assert golden_records("HygonGenuine") is None
    assert golden_records("GenuineIntel") == GOLDEN / "GenuineIntel"
    assert golden_records("AuthenticAMD") == GOLDEN / "AuthenticAMD"


def test_the_portable_part_leaves_out_what_rounding_changes():
    rows = read_csv(GOLDEN / "AuthenticAMD" / "population.csv")
    intel = read_csv(GOLDEN / "GenuineIntel" / "population.csv")
    assert rows != intel and portable(rows) == portable(intel)  # the vendors differ in one score only
    changed = [dict(row) for row in rows]
    changed[0]["learning_rate"] = "0.5"  # an initial draw is portable: a change shows
    assert portable(changed) != portable(rows)
    changed = [dict(row) for row in rows]
    changed[-1]["env_steps"] = "1"
    assert portable(changed) != portable(rows)


def test_the_vendor_is_read_from_cpuinfo():
    assert cpu_vendor("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n") == "AuthenticAMD"
    assert cpu_vendor("processor\t: 0\nvendor_id\t: GenuineIntel\n\nprocessor\t: 1\nvendor_id\t: X\n") == "GenuineIntel"
    assert cpu_vendor("processor\t: 0\nFeatures\t: fp asimd\n") == ""


def test_the_golden_runs_are_kept_per_vendor_and_avx512():
    amd = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2 avx512f avx512_bf16\n"
    assert machine_key(amd) == "AuthenticAMD-avx512"
    assert machine_key(amd.replace(" avx512f", "")) == "AuthenticAMD"
    assert machine_key("processor\t: 0\nFeatures\t: fp asimd\n") == ""
    assert runs_records("AuthenticAMD-avx512") == RUNS / "AuthenticAMD-avx512"
    assert runs_records("GenuineIntel") is None and runs_records("") is None
    for name in ("cartpole", "pendulum-normalize", "sac", "stage"):
        assert {p.name for p in (RUNS / "AuthenticAMD-avx512" / name).iterdir()} == {
            "population.csv",
            "lineage.jsonl",
            "weights.json",
        }
