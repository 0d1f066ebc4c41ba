"""``evo-export RUN``: a run's member as a Stable-Baselines3 model zip that SB3 loads where evo is not
installed, in rl-baselines3-zoo's folder layout, so that ``python -m rl_zoo3.enjoy`` plays it.

A zip that SB3 saves from an evo member names evo's classes (PPO's policy
``evo.sb3.policies.MixedPrecisionPolicy`` with ``precision`` among its kwargs, the optimizers
``evo.sb3.optimizer.EagerAdam``, the channels-last NatureCNN), and SB3's loader stops on the
missing module. So a stock SB3 model of the same algorithm and architecture is built here (SB3's
own policy, torch's Adam with the same settings, the same net_arch, activation and features
extractor), the member's state is copied into it (the state_dicts the algorithm names in
``_get_torch_save_params``: policy and optimizers; and its tensors, SAC's ``log_ent_coef``), and
SB3 saves it. The normalisation statistics go into a stock ``VecNormalize`` saved by SB3's
``VecNormalize.save``. Written::

    FOLDER/<algo>/<env>_<N>/<env>.zip           the member (N: the next free id >= 1)
    FOLDER/<algo>/<env>_<N>/best_model.zip      the run's final pick where it made one (--final-eval), else
                                                the kept best (the same member if the run kept none, or
                                                its kept best is lost: a warning says which file and why)
    FOLDER/<algo>/<env>_<N>/<env>/config.yml    its settings as rl-baselines3-zoo writes them (an Atari
                                                game's: zoo's AtariWrapper and frame stack)
    FOLDER/<algo>/<env>_<N>/<env>/args.yml      with env kwargs: them (where zoo's enjoy reads them)
    FOLDER/<algo>/<env>_<N>/<env>/vecnormalize.pkl   with normalisation: the member's statistics
    FOLDER/<algo>/<env>_<N>/evo_env_params.py    with env parameters: the wrapper that sets them (below)
    FOLDER/<algo>/<env>_<N>/<env>_impala.py     with the IMPALA CNN: the network's module (below)

    evo-export runs/my-run --out logs
    python -m rl_zoo3.enjoy --algo ppo --env Pendulum-v1 -f logs --exp-id 1

Procgen members with the NatureCNN policy export as SB3's ``CnnPolicy`` (zoo cannot make Procgen
envs, but ``PPO.load`` opens them). IMPALA members' network is evo's own class: the export writes it
beside the zip, ``FOLDER/<algo>/<env>_<N>/<env>_impala.py`` (a copy of evo/sb3/impala.py, which imports
torch, gymnasium and SB3 only), and the zips' ``policy_kwargs`` name that module's ``ImpalaCNN``, so
``PPO.load`` opens them where evo is not installed with the experiment folder on ``sys.path``. A bf16
member's weights are float32 and are exported as they are; the exported agent runs in float32, so its
returns may differ from evo's bf16 evaluation. Nothing is written into RUN. Exit status 2 on bad input,
and on an ``--out`` that cannot be written (a part of it a file, a folder you may not write). ``best`` and
``best-ever`` are refused for a run that has trained no member yet (only generation 0's checkpoint); a
member id of it exports with a warning.

``--front``: a run with several objectives (``--objective return,info:energy:min``) exports every
member of its final first Pareto front, each into its own experiment folder (best_model.zip the member
itself), and says which folder holds which member and its objectives. A member of the front that
copied a donor at the last generation is left out (its file holds the donor's weights, and the donor
is in the front), with a note.

A member with env parameters (``env.<attribute>`` hyperparameters) is played in the env it was tuned in:
the export writes evo/sb3/set_env_params.py beside the zip as ``evo_env_params.py`` (it imports gymnasium
only), and ``config.yml``'s ``env_wrapper`` names its ``SetEnvParams`` with the member's values
(``attrs``), after the run's own wrappers; the play line puts the experiment folder on ``PYTHONPATH``,
so that enjoy imports it. best_model.zip, where it is another member, is played with the exported
member's values too.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import secrets
import shutil
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path

from evo.config.envnames import procgen_game
from evo.tools.saved import BEST, BEST_EVER, LostBest, MemberFile, SavedRun, SavedRunError
from evo.tools.video import add_video_arguments, record_saved, video_problems

logger = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2


def impala_module(env_name: str) -> str:
    """The name of the module an IMPALA export writes beside ``<env_name>.zip``: ``<env_name>_impala`` as a
    Python name (``bigfish_impala``; each character that cannot be in one as ``_``)."""
    name = re.sub(r"\W", "_", env_name) + "_impala"
    return name if name.isidentifier() else f"_{name}"


@contextlib.contextmanager
def standalone_impala(folder: Path, env_name: str) -> Iterator[type]:
    """Write evo/sb3/impala.py into ``folder`` as :func:`impala_module`'s file and yield its ``ImpalaCNN``,
    imported under that name for as long as the zips are saved: SB3 pickles the class by its module's name
    (cloudpickle pickles a class by reference only while its module is in ``sys.modules``), so a zip saved
    here names ``bigfish_impala.ImpalaCNN``, which imports wherever the folder is on ``sys.path``."""
    from evo.sb3 import impala

    name = impala_module(env_name)
    path = folder / f"{name}.py"
    shutil.copyfile(impala.__file__, path)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # no __pycache__ in the export
        yield module.ImpalaCNN
    finally:
        if previous is None:
            del sys.modules[name]
        else:
            sys.modules[name] = previous


def zoo_env_name(env_id: str) -> str:
    """The folder name zoo's enjoy looks for (huggingface_sb3's EnvironmentName: slashes as dashes, so that
    ``ALE/Pong-v5`` is ``ALE-Pong-v5``; the id without a ``module:``)."""
    return env_id.replace("/", "-").split(":")[-1]


def play_line(run: SavedRun, chosen: MemberFile, experiment: Path, out: Path, format: str = "zoo") -> str:
    """What to run to play an exported member: rl_zoo3's enjoy on the env's own id (``ALE/Pong-v5``: enjoy
    names the folder with dashes itself and makes the env from the id), a user's ``module:Env`` as the env and
    ``--gym-packages module`` (enjoy imports it, so run it where the module imports), and with the member's env
    parameters the experiment folder on ``PYTHONPATH`` (enjoy imports the wrapper that sets them from there);
    Procgen, which zoo cannot make, through SB3's load and evo-evaluate; an ONNX export through onnxruntime."""
    from evo.sb3.set_env_params import EXPORTED_AS
    from evo.sb3.stock import zoo_algo

    env_id, algo = run.config.env_id, zoo_algo(run.config.algo)
    if format == "onnx":
        model = experiment / f"{zoo_env_name(env_id)}.onnx"
        return (
            f"run it: onnxruntime.InferenceSession('{model}'), its observations prepared as {model}.json's "
            "preprocessing says"
        )
    if procgen_game(env_id):  # zoo has no Procgen envs: SB3 loads the zip, evo-evaluate plays it
        path = "" if run.config.agent.policy != "impala" else f"with {experiment} on sys.path (its IMPALA CNN), "
        return (
            f"load it {path}by stable_baselines3.{algo.upper()}.load('{experiment / (zoo_env_name(env_id) + '.zip')}') "
            f"(rl_zoo3 cannot make Procgen envs); play it: evo-evaluate {run.run_dir} --member {chosen.member} "
            f"--generation {chosen.generation}, --video FILE for a video"
        )
    module, colon, name = env_id.rpartition(":")
    packages = f" --gym-packages {module}" if colon else ""
    where = f" (from a folder where `import {module}` works)" if colon else ""
    path = f"PYTHONPATH={experiment}:$PYTHONPATH " if (experiment / f"{EXPORTED_AS}.py").is_file() else ""
    return (
        f"play it{where}: {path}python -m rl_zoo3.enjoy --algo {algo} --env {name}{packages} -f {out} --exp-id "
        f"{experiment.name.rsplit('_', 1)[1]}"
    )


def next_experiment(folder: Path, algo: str, env_name: str) -> Path:
    """``folder/<algo>/<env>_<N>`` with N the next free id >= 1 (zoo's get_latest_run_id + 1)."""
    pattern = re.compile(re.escape(env_name) + r"_(\d+)")
    root = folder / algo
    taken = [int(m.group(1)) for p in (root.iterdir() if root.is_dir() else []) if (m := pattern.fullmatch(p.name))]
    return root / f"{env_name}_{max(taken, default=0) + 1}"


def export(run: SavedRun, chosen: MemberFile, out: Path, best: MemberFile | None = None, format: str = "zoo") -> Path:
    """Write ``chosen`` (and ``best`` as best_model.zip, else ``chosen``) into zoo's layout under
    ``out`` (``format`` onnx: ``chosen``'s policy as ONNX and its description, :func:`_write_onnx`);
    returns the experiment folder ``out/<algo>/<env>_<N>`` (zoo's name of the algorithm: evo.sb3.stock.zoo_algo)."""
    from evo.sb3.stock import zoo_algo

    algo = zoo_algo(run.config.algo)
    env_name = zoo_env_name(run.config.env_id)
    experiment = next_experiment(Path(out), algo, env_name)
    # a name nobody can know beforehand, made by mkdir (which never follows a link at it): a link planted at a
    # known name once made the export write its files into the folder it pointed to
    building = experiment.with_name(f".{experiment.name}.partial-{os.getpid()}-{secrets.token_hex(8)}")
    try:
        if format == "onnx":
            _write_onnx(run, chosen, building, env_name)
        else:
            _write(run, chosen, best, building, env_name)
        building.rename(experiment)  # all or nothing: enjoy never sees half an export
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return experiment


def best_model(run: SavedRun, chosen: MemberFile) -> tuple[MemberFile | None, str | None]:
    """What best_model.zip holds beside ``chosen``: the run's final pick where it made one, else its kept
    best; None (best_model.zip is then ``chosen``) with the warning that says why when the kept best is lost."""
    from evo.tools.saved import best_ever, final_pick

    best = final_pick(run)
    if best is not None:
        return best, None
    try:
        return best_ever(run), None
    except LostBest as lost:
        return None, f"best_model.zip holds member {chosen.label}, not the kept best, which is lost: {lost.why}"


def export_pick(run_dir: Path, out: Path) -> Path:
    """What ``evo-export RUN --out OUT`` writes (the run's pick, :data:`~evo.tools.saved.BEST`, with
    :func:`best_model`), for ``--tracker``'s artifact at the end of a complete run; returns the experiment
    folder. Raises SavedRunError or OSError where evo-export refuses."""
    from evo.tools.saved import choose, open_run

    run = open_run(run_dir)
    chosen = choose(run, BEST)
    best, lost = best_model(run, chosen)
    if lost:
        logger.warning("the tracked export: %s", lost)
    return export(run, chosen, out, best)


def onnx_missing() -> list[str]:
    """What ``--format onnx`` needs and is not installed (onnx, onnxruntime), as one problem."""
    import importlib.util

    missing = [name for name in ("onnx", "onnxruntime") if importlib.util.find_spec(name) is None]
    if not missing:
        return []
    return [
        f"--format onnx: {' and '.join(missing)} not installed; install the onnx extra (make install "
        "EXTRAS=onnx, or pip install onnx onnxruntime), or drop --format onnx"
    ]


def _write_onnx(run: SavedRun, chosen: MemberFile, folder: Path, env_name: str) -> None:
    """``chosen``'s policy as ``<env>.onnx`` and its description, ``<env>.onnx.json`` (the observation
    preprocessing it expects, its outputs, the action space, onnxruntime's check against torch on observations
    recorded from its envs: evo.sb3.onnx_export)."""
    from evo.sb3.onnx_export import export_onnx, onnx_problems
    from evo.sb3.stock import zoo_config
    from evo.tools.saved import load

    folder.mkdir(parents=True)  # its own name is new: mkdir fails on whatever is there, a link included
    member = load(run, chosen, precision="fp32")
    try:
        if problems := onnx_problems(member.model.policy):
            raise SavedRunError(f"--format onnx: member {chosen.label}: {'; '.join(problems)}")
        config = zoo_config(member)
        about = {"algo": run.config.algo, "env_id": run.config.env_id, "member": chosen.member}
        about.update(generation=chosen.generation, env_steps=chosen.env_steps)
        about.update({name: config[name] for name in ("env_kwargs", "env_wrapper") if name in config})
        export_onnx(member, folder / f"{env_name}.onnx", folder / f"{env_name}.onnx.json", about)
    finally:
        member.close()


def _write(run: SavedRun, chosen: MemberFile, best: MemberFile | None, folder: Path, env_name: str) -> None:
    folder.mkdir(parents=True)  # its own name is new: mkdir fails on whatever is there, a link included
    (folder / env_name).mkdir()
    extractor = standalone_impala(folder, env_name) if run.config.agent.policy == "impala" else contextlib.nullcontext()
    with extractor as impala:
        _write_models(run, chosen, best, folder, env_name, impala)


def _write_models(
    run: SavedRun, chosen: MemberFile, best: MemberFile | None, folder: Path, env_name: str, impala: type | None
) -> None:
    import yaml

    from evo.sb3 import set_env_params
    from evo.sb3.stock import ENV_PARAMS_WRAPPER, save_normalization, stock_model, zoo_config
    from evo.tools.saved import load

    stats_dir = folder / env_name
    member = load(run, chosen, precision="fp32")
    try:
        stock_model(member, impala).save(str(folder / f"{env_name}.zip"))
        if member.normalizer is not None:
            save_normalization(member, stats_dir / "vecnormalize.pkl")
        config = zoo_config(member)
        with open(stats_dir / "config.yml", "w") as handle:
            yaml.dump(config, handle)
        if any(ENV_PARAMS_WRAPPER in entry for entry in config.get("env_wrapper", ()) if isinstance(entry, dict)):
            shutil.copyfile(set_env_params.__file__, folder / f"{set_env_params.EXPORTED_AS}.py")
        if config.get("env_kwargs"):  # zoo's enjoy reads the env's kwargs from the training command's args.yml
            with open(stats_dir / "args.yml", "w") as handle:
                yaml.dump({"env_kwargs": dict(config["env_kwargs"])}, handle)
    finally:
        member.close()
    if best is None or same_weights(best, chosen):
        shutil.copyfile(folder / f"{env_name}.zip", folder / "best_model.zip")
        return
    kept = load(run, best, precision="fp32")
    try:
        stock_model(kept, impala).save(str(folder / "best_model.zip"))
        if kept.normalizer is not None:
            save_normalization(kept, stats_dir / "best_model_vecnormalize.pkl")
    finally:
        kept.close()


def same_weights(one: MemberFile, other: MemberFile) -> bool:
    """Whether two member files hold the same weights: the same member at the same generation and
    env step (the kept best of the last generation is a copy of that member's file)."""
    return (one.member, one.generation, one.env_steps) == (other.member, other.generation, other.env_steps)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evo-export", description=__doc__.split("\n\n")[0].replace("``", ""))
    parser.add_argument("run_dir", type=Path, metavar="RUN", help="the run directory (--run-dir of the run)")
    parser.add_argument(
        "--member",
        default=None,
        help=f"{BEST} (default: the run's final pick where it made one, --final-eval; else the best selection "
        f"score of the last checkpoint, or of --generation's), {BEST_EVER} (the kept best) or a member id",
    )
    parser.add_argument(
        "--front",
        action="store_true",
        help="a run with several objectives: every member of its final first Pareto front, each in its own folder",
    )
    parser.add_argument(
        "--generation", type=int, default=None, help="a kept checkpoint's generation (default: the last)"
    )
    parser.add_argument("--out", type=Path, default=Path("logs"), help="zoo's log folder, enjoy's -f (default ./logs)")
    parser.add_argument(
        "--format",
        choices=("zoo", "onnx"),
        default="zoo",
        help="zoo: SB3 zips in rl-baselines3-zoo's layout (default); onnx: the policy as <env>.onnx with "
        "<env>.onnx.json stating its observation preprocessing, checked by onnxruntime (the onnx extra)",
    )
    add_video_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from evo.logs import install_logging
    from evo.tools.saved import choose, evaluation_seed, open_run, output_problems, untrained_warning

    args = parser().parse_args(argv)
    install_logging(0)
    if args.front:
        return main_front(args)
    args.member = BEST if args.member is None else args.member
    warnings = []
    try:
        run = open_run(args.run_dir)
        problems = video_problems(args, run)
        problems += onnx_missing() if args.format == "onnx" else []
        problems += output_problems("--out", args.out, folder=True) + output_problems("--video", args.video)
        if problems:
            raise SavedRunError("; ".join(problems))
        if args.out.resolve().is_relative_to(run.run_dir.resolve()):
            raise SavedRunError(
                f"--out {args.out}: inside the run directory, which evo-export never writes; give a folder outside it"
            )
        chosen = choose(run, args.member, args.generation)
        if args.member not in (BEST, BEST_EVER) and (note := untrained_warning([chosen])):
            warnings.append(note)
        best, lost = best_model(run, chosen)
        warnings += [lost] if lost else []
    except SavedRunError as error:
        print(f"evo-export: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for warning in warnings:
        print(f"evo-export: warning: {warning}", file=sys.stderr)
    try:
        experiment = export(run, chosen, args.out, best, args.format)
    except SavedRunError as error:
        print(f"evo-export: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:
        print(
            f"evo-export: error: --out {args.out}: the export cannot be written ({error}); give a folder you may "
            "write to, with room for it",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    env_name = zoo_env_name(run.config.env_id)
    print(f"member {chosen.label} of generation {chosen.generation} ({chosen.env_steps} env steps): {experiment}")
    if run.config.precision != "fp32":
        print(
            f"note: trained with --precision {run.config.precision}; the export holds its float32 weights and runs "
            f"in float32, so its returns may differ from evo's {run.config.precision} evaluation"
        )
    if best is not None and not same_weights(best, chosen) and run.config.agent.normalizes:
        print(
            f"note: {env_name}/vecnormalize.pkl holds {env_name}.zip's statistics (zoo reads it for best_model.zip "
            f"too); best_model.zip's own are {env_name}/best_model_vecnormalize.pkl, or export --member "
            f"{BEST_EVER if best.label.startswith(BEST_EVER) else BEST}"
        )
    print(play_line(run, chosen, experiment, args.out, args.format))
    if args.video is not None:  # on evo-evaluate's fresh seed: the episode it plays first
        return record_saved("evo-export", run, chosen, args.video, evaluation_seed(run.config.seed), args.video_steps)
    return 0


def main_front(args: argparse.Namespace) -> int:
    """``evo-export RUN --front``: every member of the run's final first Pareto front."""
    from evo.tools.saved import front, open_run, output_problems

    try:
        given = [flag for flag, value in (("--member", args.member), ("--generation", args.generation),
                                          ("--video", args.video)) if value is not None]  # fmt: skip
        if given:
            raise SavedRunError(
                f"--front {' '.join(given)}: --front exports the final first front, each of its members; drop "
                f"{', '.join(given)}, or drop --front to export one member"
            )
        run = open_run(args.run_dir)
        problems = output_problems("--out", args.out, folder=True)
        problems += onnx_missing() if args.format == "onnx" else []
        if problems:
            raise SavedRunError("; ".join(problems))
        if args.out.resolve().is_relative_to(run.run_dir.resolve()):
            raise SavedRunError(
                f"--out {args.out}: inside the run directory, which evo-export never writes; give a folder outside it"
            )
        chosen, copied = front(run)
    except SavedRunError as error:
        print(f"evo-export: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from evo.rundir.history import load_run

    history = load_run(run.run_dir)
    for member in copied:
        print(
            f"evo-export: note: member {member} of the front copied a donor there; its file holds the donor's weights"
        )
    for member_file in chosen:
        try:
            experiment = export(run, member_file, args.out, format=args.format)
        except SavedRunError as error:
            print(f"evo-export: error: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except OSError as error:
            print(f"evo-export: error: --out {args.out}: the export cannot be written ({error})", file=sys.stderr)
            return EXIT_BAD_INPUT
        objectives = history.row(member_file.generation, member_file.member).objectives
        shown = ", ".join(f"{name} {value:.4g}" for name, value in objectives.items())
        print(f"member {member_file.member} of generation {member_file.generation} ({shown}): {experiment}")
        print(f"  {play_line(run, member_file, experiment, args.out, args.format)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
