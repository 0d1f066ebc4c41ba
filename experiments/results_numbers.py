"""Numbers docs/results.md quotes about the Procgen studies and the horizon study, recomputed from the
committed records (issue 55, item 8), and the record of the descriptive rows they add.

    python experiments/results_numbers.py            # print them and write the record
    python experiments/results_numbers.py --check    # exit 1 if the committed record differs

From the runs' own files only (population.csv, the re-evaluation caches, the floors' episodes, results.json),
not from a report: the selected member at a point is the one its generation's selection score ranks first,
the lower member id on a tie, as the committed reports chose it. Written to
``docs/results/procgen-learning/descriptive.json``:

- ``normalised``: every fresh mean of the learning study (each method's selected member by seed and fraction,
  the floors) and of the pilot's agent, normalised as the Procgen paper normalises scores,
  (R - R_min) / (R_max - R_min) with the paper's easy-mode constants (``PROCGEN_EASY``);
- ``pilot_games``: the pilot's four agents (StarPilot, FruitBot, CoinRun, BigFish) on their 100 fresh episodes at
  25, 50, 75 and 100 % and their higher floors, raw and normalised;
- ``pilot_total``: the pilot's StarPilot agent (one agent with the paper's settings, trained 1,572,864 env steps:
  a population's total in the learning study) on the learning study's seed-0 fresh episodes (the same 100:
  the caches' ``how`` is checked), beside the seed-0 selected members at 100 %, with the paired difference
  episode by episode;
- ``below_floor``: every selected agent at every point less than 3 standard errors above its seed's higher floor;
- ``ties``: every point whose selected member was tied on its selection score, and what each tied member
  returned, with the comparisons that rest on one.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
LEARNING = RESULTS / "procgen-learning"
RECORD = LEARNING / "descriptive.json"

PROCGEN_EASY = {"starpilot": (2.5, 64.0), "fruitbot": (-1.5, 32.4), "coinrun": (5.0, 10.0), "bigfish": (1.0, 40.0)}
"""R_min and R_max of the easy distribution: Cobbe et al. 2020, "Leveraging Procedural Generation to Benchmark
Reinforcement Learning" (ICML 2020, arXiv:1912.01588), Appendix C, "Normalization Constants" (R_min: a policy
trained with its observations masked out; R_max for StarPilot and FruitBot: PPO after 8 billion env steps)."""
SOURCE = (
    "Cobbe et al. 2020, Leveraging Procedural Generation to Benchmark Reinforcement Learning, arXiv:1912.01588, "
    "Appendix C (Normalization Constants), easy mode; the appendix's text is quoted in openai/procgen issue 79"
)
SEPARATION_SE = 3.0
METHODS = ("pbt", "pb2-mix", "random", "paper-default")
SEEDS = (0, 1, 2)
FRACTIONS = (0.25, 0.5, 1.0)
GENERATIONS = 12
PILOT_GENERATIONS = 16
PILOT_STEPS = 98304
"""The pilot's env steps per generation (6 of the paper's 64 x 256 rollouts)."""
PILOT = RESULTS / "procgen-pilot-100" / "starpilot" / "paper-default-seed0"
PILOT_20 = RESULTS / "procgen-pilot" / "starpilot" / "paper-default-seed0"


def normalised(game: str, value: float) -> float:
    low, high = PROCGEN_EASY[game]
    return (value - low) / (high - low)


def mean_se(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) / math.sqrt(len(values))


def t_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float, float]:
    from scipy.stats import t

    mean = statistics.mean(values)
    half = t.ppf((1 + confidence) / 2, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def cache(run_dir: Path, generation: int, last: int) -> dict:
    name = "reevaluation.json" if generation == last else f"reevaluation-gen{generation:06d}.json"
    return json.loads((run_dir / name).read_text())


def selection_scores(run_dir: Path, generation: int) -> dict[int, float]:
    with (run_dir / "population.csv").open() as handle:
        return {
            int(r["member"]): float(r["score"]) for r in csv.DictReader(handle) if int(r["generation"]) == generation
        }


def point(run_dir: Path, generation: int, last: int) -> dict:
    """The selected member at ``generation`` (first by selection score, the lower id on a tie), its fresh
    mean and standard error, and the members it was tied with."""
    scores = selection_scores(run_dir, generation)
    top = max(scores.values())
    tied = sorted(m for m, s in scores.items() if s == top)
    record = cache(run_dir, generation, last)
    returns = {int(m): r for m, r in record["members"].items()}
    mean, se = mean_se(returns[tied[0]])
    return {
        "generation": generation, "selected_member": tied[0], "selection_score": round(top, 6),
        "fresh": round(mean, 6), "fresh_se": round(se, 6), "tied": tied,
        "tied_fresh": {str(m): round(statistics.mean(returns[m]), 6) for m in tied},
        "tied_fresh_se": {str(m): round(mean_se(returns[m])[1], 6) for m in tied}, "how": record["how"],
        "returns": returns[tied[0]],
    }  # fmt: skip


def floors(path: Path) -> dict:
    """The uniform-random policy's and the best constant action's means and standard errors, and the higher."""
    record = json.loads(path.read_text())
    random_mean, random_se = mean_se(record["random"])
    action, constant = max(record["constant"].items(), key=lambda kv: (statistics.mean(kv[1]), -int(kv[0])))
    constant_mean, constant_se = mean_se(constant)
    higher = (constant_mean, constant_se) if constant_mean > random_mean else (random_mean, random_se)
    return {
        "random": round(random_mean, 6), "random_se": round(random_se, 6), "constant": round(constant_mean, 6),
        "constant_se": round(constant_se, 6), "action": int(action), "higher": round(higher[0], 6),
        "higher_se": round(higher[1], 6), "how": record["how"],
    }  # fmt: skip


def above(fresh: float, se: float, floor: dict) -> float:
    return (fresh - floor["higher"]) / math.sqrt(se**2 + floor["higher_se"] ** 2)


def learning_points() -> dict[tuple[str, int, float], dict]:
    found = {}
    for method in METHODS:
        for seed in SEEDS:
            run_dir = LEARNING / "starpilot" / f"{method}-seed{seed}"
            for fraction in FRACTIONS:
                found[(method, seed, fraction)] = point(run_dir, round(fraction * GENERATIONS), GENERATIONS)
    return found


def r6(value: float) -> float:
    return round(value, 6)


def normalised_row(method: str, fraction: float | None, values: list[float]) -> dict:
    """One row of the normalised table: the fresh means by seed and their mean, raw and normalised."""
    mean = statistics.mean(values)
    return {
        "method": method,
        "fraction": fraction,
        "by_seed": values,
        "normalised_by_seed": [r6(normalised("starpilot", v)) for v in values],
        "mean": r6(mean),
        "normalised_mean": r6(normalised("starpilot", mean)),
    }


def normalised_rows(points: dict, floor: dict) -> list[dict]:
    rows = [
        normalised_row(method, fraction, [points[(method, seed, fraction)]["fresh"] for seed in SEEDS])
        for method in METHODS
        for fraction in FRACTIONS
    ]
    rows.append(normalised_row("floor: uniform-random policy", None, [floor[seed]["random"] for seed in SEEDS]))
    rows.append(normalised_row("floor: best constant action", None, [floor[seed]["constant"] for seed in SEEDS]))
    return rows


def pilot_total(points: dict, floor: dict) -> dict:
    """The pilot's agent at each fraction of its 1,572,864 env steps on the learning study's seed-0 episodes,
    and beside it at 100 % the seed-0 selected members, paired episode by episode."""
    pilot = {f: point(PILOT, round(f * PILOT_GENERATIONS), PILOT_GENERATIONS) for f in (0.25, 0.5, 0.75, 1.0)}
    played = floors(PILOT.parent.parent / "floors" / "starpilot-seed0.json")["how"]
    if pilot[1.0]["how"] != points[("pbt", 0, 1.0)]["how"] or played != floor[0]["how"]:
        raise SystemExit("the pilot's fresh episodes are not the learning study's seed-0 episodes")
    rows = [
        {
            "fraction": f,
            "env_steps": round(f * PILOT_GENERATIONS * PILOT_STEPS),
            "fresh": p["fresh"],
            "fresh_se": p["fresh_se"],
            "normalised": r6(normalised("starpilot", p["fresh"])),
            "standard_errors_above_floor": r6(above(p["fresh"], p["fresh_se"], floor[0])),
        }
        for f, p in pilot.items()
    ]
    beside = {}
    for method in ("pbt", "pb2-mix", "random"):
        selected = points[(method, 0, 1.0)]
        mean, se = mean_se([a - b for a, b in zip(pilot[1.0]["returns"], selected["returns"], strict=True)])
        beside[method] = {
            "fresh": selected["fresh"],
            "fresh_se": selected["fresh_se"],
            "normalised": r6(normalised("starpilot", selected["fresh"])),
            "pilot_minus_it": r6(mean),
            "pilot_minus_it_se": r6(se),
        }
    return {
        "env_steps": PILOT_GENERATIONS * PILOT_STEPS,
        "episodes": pilot[1.0]["how"],
        "points": rows,
        "seed0_at_100": beside,
    }


def below_floor(points: dict, floor: dict) -> list[dict]:
    found = []
    for (method, seed, fraction), p in points.items():
        errors = above(p["fresh"], p["fresh_se"], floor[seed])
        if errors < SEPARATION_SE:
            found.append(
                {
                    "method": method,
                    "seed": seed,
                    "fraction": fraction,
                    "fresh": p["fresh"],
                    "standard_errors": r6(errors),
                }
            )
    return found


def ties(points: dict, floor: dict) -> list[dict]:
    """The points whose selected member was tied on its selection score: each tied member's fresh mean and how
    many standard errors it is above the seed's higher floor."""
    found = []
    for (method, seed, fraction), p in points.items():
        if len(p["tied"]) > 1:
            above_floor = {
                m: r6(above(p["tied_fresh"][m], p["tied_fresh_se"][m], floor[seed])) for m in p["tied_fresh"]
            }
            found.append(
                {
                    "method": method,
                    "seed": seed,
                    "fraction": fraction,
                    "generation": p["generation"],
                    "selection_score": p["selection_score"],
                    "tied": p["tied"],
                    "tied_fresh": p["tied_fresh"],
                    "tied_standard_errors_above_floor": above_floor,
                }
            )
    return found


def paired_summary(differences: list[float]) -> dict:
    mean, low, high = t_interval(differences)
    return {
        "differences": [r6(d) for d in differences],
        "mean": r6(mean),
        "low": r6(low),
        "high": r6(high),
        "higher_in": sum(d > 0 for d in differences),
        "lower_in": sum(d < 0 for d in differences),
    }


def pb2_mix_against_random(points: dict) -> dict:
    """The secondary comparison pb2-mix − random at 100 % as reported (the lower id of a tie), and with each
    other member of a tie in its place."""
    pb2 = {seed: points[("pb2-mix", seed, 1.0)] for seed in SEEDS}
    random = {seed: points[("random", seed, 1.0)]["fresh"] for seed in SEEDS}
    found = paired_summary([pb2[seed]["fresh"] - random[seed] for seed in SEEDS])
    others = []
    for tied_seed in SEEDS:
        for member in pb2[tied_seed]["tied"][1:]:
            fresh = {seed: pb2[seed]["fresh"] for seed in SEEDS} | {
                tied_seed: pb2[tied_seed]["tied_fresh"][str(member)]
            }
            others.append(
                {"seed": tied_seed, "member": member, **paired_summary([fresh[s] - random[s] for s in SEEDS])}
            )
    return found | {"with_the_other_tied_member": others}


def pilot_games() -> dict:
    """The pilot's four agents on their 100 fresh episodes at each fraction, and their games' higher floor,
    raw and normalised."""
    found = {}
    for game in PROCGEN_EASY:
        run_dir = PILOT.parent.parent / game / "paper-default-seed0"
        floor = floors(PILOT.parent.parent / "floors" / f"{game}-seed0.json")
        points = {f: point(run_dir, round(f * PILOT_GENERATIONS), PILOT_GENERATIONS) for f in (0.25, 0.5, 0.75, 1.0)}
        found[game] = {
            "fresh": [points[f]["fresh"] for f in points],
            "normalised": [r6(normalised(game, points[f]["fresh"])) for f in points],
            "higher_floor": floor["higher"],
            "higher_floor_normalised": r6(normalised(game, floor["higher"])),
        }
    return found


def record() -> dict:
    points = learning_points()
    floor = {seed: floors(LEARNING / "floors" / f"starpilot-seed{seed}.json") for seed in SEEDS}
    return {
        "source": "docs/results/procgen-learning and docs/results/procgen-pilot-100 run records (population.csv, "
        "re-evaluation caches, floors); experiments/results_numbers.py",
        "normalisation": {
            "formula": "(R - R_min) / (R_max - R_min)",
            "constants_easy": PROCGEN_EASY,
            "constants_source": SOURCE,
        },
        "normalised": normalised_rows(points, floor),
        "pilot_total": pilot_total(points, floor),
        "pilot_games": pilot_games(),
        "below_floor": below_floor(points, floor),
        "ties": ties(points, floor),
        "pb2_mix_minus_random_at_100": pb2_mix_against_random(points),
    }


def horizon() -> dict:
    """pbt − random at 100 % in the horizon study, from its results.json (rebuilt from its records by a test)."""
    runs = json.loads((RESULTS / "horizon" / "results.json").read_text())
    fresh = {(r["method"], r["seed"]): r["fresh_selected"] for r in runs}
    differences = [fresh[("pbt", s)] - fresh[("random", s)] for s in range(8)]
    mean, low, high = t_interval(differences)
    _, low_bonferroni, high_bonferroni = t_interval(differences, 0.975)
    return {"mean": mean, "low": low, "high": high, "low_97_5": low_bonferroni, "high_97_5": high_bonferroni}


def pilot_20_at_393216() -> float:
    """Standard errors above the higher floor of the pilot's StarPilot agent at 393,216 env steps on the 20
    planned episodes (the README quoted the full budget's 2.7 there)."""
    p = point(PILOT_20, 4, PILOT_GENERATIONS)
    return above(p["fresh"], p["fresh_se"], floors(PILOT_20.parent.parent / "floors" / "starpilot-seed0.json"))


def share(value: float) -> str:
    """A normalised score as a percentage of the paper's range, as docs/results.md shows it."""
    return f"{value * 100:.2f} %".replace("-", "−")


def normalised_table(found: dict) -> str:
    """docs/results.md's table of the normalised scores, from the record."""
    rows = {(r["method"], r["fraction"]): r for r in found["normalised"]}
    lines = [
        "| method | 25 % | 50 % | 100 % | fresh return at 100 % (mean of the seeds) |",
        "|---|---|---|---|---|",
    ]
    labels = {"paper-default": "paper-default (of its own 393,216 env steps)"}
    for method in METHODS:
        cells = [share(rows[(method, f)]["normalised_mean"]) for f in FRACTIONS]
        lines.append(f"| {labels.get(method, method)} | {' | '.join(cells)} | {rows[(method, 1.0)]['mean']:.2f} |")
    for name in ("floor: uniform-random policy", "floor: best constant action"):
        row = rows[(name, None)]
        cells = [share(row["normalised_mean"])] * 3  # the same episodes at every point
        lines.append(f"| *{name}* (the same episodes at every point) | {' | '.join(cells)} | {row['mean']:.2f} |")
    pilot = {p["fraction"]: p for p in found["pilot_total"]["points"]}
    cells = [share(pilot[f]["normalised"]) for f in FRACTIONS]
    lines.append(
        f"| *the pilot's agent* (seed 0's episodes only; 1,572,864 env steps at 100 %) | {' | '.join(cells)} | "
        f"{pilot[1.0]['fresh']:.2f} |"
    )
    return "\n".join(lines) + "\n"


def text(value: dict) -> str:
    return json.dumps(value, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare with the committed record")
    args = parser.parse_args(argv)
    made = text(record())
    if args.check:
        same = RECORD.is_file() and RECORD.read_text() == made
        print(f"{RECORD}: {'as committed' if same else 'differs from what the records give'}")
        return 0 if same else 1
    RECORD.write_text(made)
    found = horizon()
    print(f"horizon, pbt - random at 100 %: {found['mean']:+.2f} [{found['low']:.0f}, {found['high']:.0f}]; "
          f"Bonferroni 97.5 %: [{found['low_97_5']:.0f}, {found['high_97_5']:.0f}]")  # fmt: skip
    print(f"pilot, 20 planned episodes, at 393,216 env steps: {pilot_20_at_393216():.1f} standard errors above")
    print(normalised_table(json.loads(made)))
    print(f"wrote {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
