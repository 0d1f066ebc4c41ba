"""The batch scripts in slurm/ under a real SLURM (22.05 from Debian's packages, one node,
brought up by scripts/local-slurm.sh): a run to completion, scancel's USR1 to the batch
script and to every process, a pre-emption by a job in the higher-priority partition, and
both launchers. Every stop must end in a checkpoint, a requeue and a resumed part that
records each (generation, member) exactly once.

A requeued job is held by SLURM for AuthInfo's cred_expire + 1 s (121 s by default) before
it may start again. Lifting the hold (`scontrol update JobId=N StartTime=now`) is not safe:
the job then starts while its credential is still revoked and fails ("Killing non-startable
batch job: Job credential revoked"), or srun's step clashes with the previous part's. So the
test cluster runs with cred_expire=5 (the least SLURM takes), the tests check the hold is cred_expire + 1 s and
wait for it.
"""

import hashlib
import os
import re
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.gated_env import gate_flags, held
from tests.support import ROOT, TINY_DEFAULT, generations_recorded, mpi_env, read_population, write_hyperparams

LOCAL_SLURM = ROOT / "scripts" / "local-slurm.sh"
# The tier's private instance (scripts/local-slurm.sh's LOCAL_SLURM_DIR): not the default one, so
# that an instance a user brought up to try the batch scripts is left alone.
SLURM_DIR = Path(os.environ.get("EVO_TEST_SLURM_DIR", "/var/lib/local-slurm-evo-tests"))
CRED_EXPIRE = 5  # a requeued job waits 6 s (SLURM's default: 121 s; it refuses less than 5)
SCHED_INTERVAL = 1  # the scheduler looks at pending jobs every second (the script's default: 5)
GRACE_TIME = 20  # asked of local-slurm.sh for the normal partition: time enough for a checkpoint
SHORT_GRACE_TIME = 5  # for the test that waits for the GraceTime to end
KILL_WAIT = 5  # then SIGTERM, and SIGKILL 5 s later if the job is still there (SLURM's default: 30 s)
# A signalled job trains 3 generations of 2048 env steps; its ranks are held inside generation 2
# (tests/gated_env.py: at each env's step 1124 of 1024 a generation) until the signal (scancel's or a
# pre-emption's) reaches them, so it stops there with generation 1's checkpoint on any machine, and
# the requeued part goes through the gate and trains generations 2 and 3.
SIGNALLED_GENERATIONS = 3
SIGNALLED_STEPS = 2048


@pytest.fixture(scope="session")
def cluster():
    """A private one-node SLURM for the session (its own configuration, ports, state and munged,
    in SLURM_DIR; clients reach it through SLURM_CONF); skips where this machine cannot run one."""
    if os.geteuid() != 0:
        pytest.skip("the slurm tier installs and starts SLURM daemons: it needs root")
    if not shutil.which("apt-get") and not shutil.which("slurmctld"):
        pytest.skip("the slurm tier needs apt-get (Debian/Ubuntu) or SLURM installed")
    installed = subprocess.run(
        [str(LOCAL_SLURM), "install"], env=slurm_env(), capture_output=True, text=True, timeout=600
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    system = system_slurm_files()  # as the packages left them (they ship /etc/slurm/plugstack.conf, a munge key)
    started = time.monotonic()
    said = local_slurm_up()
    print(f"\nlocal SLURM up in {time.monotonic() - started:.1f}s: {said}")
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(SLURM_DIR / "slurm.conf")
    assert f"GraceTime={GRACE_TIME} " in partition_settings()
    yield system
    down = subprocess.run([str(LOCAL_SLURM), "down"], env=slurm_env(), capture_output=True, text=True, timeout=120)
    if previous is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = previous
    assert down.returncode == 0, down.stdout + down.stderr


def slurm_env(directory: Path = SLURM_DIR, **settings: str) -> dict[str, str]:
    """The environment for local-slurm.sh: the tier's instance (or another, in ``directory``)."""
    return {
        **os.environ,
        "LOCAL_SLURM_DIR": str(directory),
        "LOCAL_SLURM_GRACE_TIME": str(GRACE_TIME),
        "LOCAL_SLURM_CRED_EXPIRE": str(CRED_EXPIRE),
        "LOCAL_SLURM_KILL_WAIT": str(KILL_WAIT),
        "LOCAL_SLURM_SCHED_INTERVAL": str(SCHED_INTERVAL),
        **settings,
    }


def local_slurm_up(directory: Path = SLURM_DIR, **settings: str) -> str:
    """`local-slurm.sh up` with this tier's GraceTime and cred_expire (more settings reconfigure)."""
    up = subprocess.run(
        [str(LOCAL_SLURM), "up"], env=slurm_env(directory, **settings), capture_output=True, text=True, timeout=600
    )
    assert up.returncode == 0, up.stdout + up.stderr
    return up.stdout.strip()


def system_slurm_files() -> dict[str, str]:
    """What the machine's own SLURM and munge configuration hold (path -> SHA-256), which the
    private instance must never change."""
    found = {}
    for folder in (Path("/etc/slurm"), Path("/etc/munge")):
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.fixture
def preempt_send_user_signal(cluster):
    """SlurmctldParameters=preempt_send_user_signal for one test."""
    local_slurm_up(LOCAL_SLURM_SEND_USER_SIGNAL="1")
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    assert "preempt_send_user_signal" in config
    yield
    local_slurm_up()


@pytest.fixture
def short_grace_time(cluster):
    """The normal partition's GraceTime at SHORT_GRACE_TIME s for one test."""
    local_slurm_up(LOCAL_SLURM_GRACE_TIME=str(SHORT_GRACE_TIME))
    assert f"GraceTime={SHORT_GRACE_TIME} " in partition_settings()
    yield SHORT_GRACE_TIME
    local_slurm_up()
    assert f"GraceTime={GRACE_TIME} " in partition_settings()


def partition_settings() -> str:
    shown = subprocess.run(["scontrol", "-o", "show", "partition", "normal"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


class Job:
    """One batch job submitted from the checkout, its log and run directory in tmp_path."""

    def __init__(
        self,
        tmp_path: Path,
        script: str,
        launcher: str,
        hyperparams: Path,
        *sbatch_args: str,
        steps=8000,
        generations=3,
        env_flags=("--env-id", "CartPole-v1"),
    ):
        self.run_dir = tmp_path / "run"
        self.log_dir = tmp_path
        env = {
            **mpi_env(),
            "LAUNCHER": launcher,
            "RUN_DIR": str(self.run_dir),
            "EVO_EXTRA_ARGS": f"{' '.join(env_flags)} --hyperparams {hyperparams} --total-generations {generations} "
            f"--agent-training-steps {steps} --seed 5",
        }
        submitted = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--mem=2G",
                "--time=10",
                f"--output={tmp_path}/job-%j.out",
                *sbatch_args,
                str(ROOT / "slurm" / script),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert submitted.returncode == 0, submitted.stderr
        self.id = submitted.stdout.strip().split(";")[0]

    def info(self) -> dict[str, str]:
        shown = subprocess.run(["scontrol", "-o", "show", "job", self.id], capture_output=True, text=True, timeout=30)
        assert shown.returncode == 0, shown.stderr
        return dict(field.split("=", 1) for field in shown.stdout.split() if "=" in field)

    def log(self) -> str:
        path = self.log_dir / f"job-{self.id}.out"
        return path.read_text() if path.exists() else ""

    def wait_until(self, predicate, timeout: float, what: str) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.info()
            if predicate(info):
                return info
            assert info["JobState"] not in ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"), self.failure(info)
            time.sleep(0.5)
        pytest.fail(f"job {self.id}: timed out after {timeout}s waiting for {what}\n{self.failure(self.info())}")

    def failure(self, info) -> str:
        return f"{info.get('JobState')} {info.get('Reason')} exit {info.get('ExitCode')}\n{self.log()[-4000:]}"

    def wait_for_generation(self, generation: int, timeout: float = 240) -> None:
        def done(info):
            return (self.run_dir / "population.csv").exists() and len(read_population(self.run_dir)) >= 2 * generation

        self.wait_until(done, timeout, f"generation {generation} in population.csv")

    def wait_for_log(self, pattern: str, after: int = 0, timeout: float = 240) -> re.Match:
        """The first match of ``pattern`` in the job's log past offset ``after``."""
        found = []

        def logged(info):
            found[:] = [re.compile(pattern).search(self.log(), after)]
            return found[0] is not None

        self.wait_until(logged, timeout, f"{pattern!r} in its log")
        return found[0]

    def wait_completed(self, timeout: float = 300) -> dict[str, str]:
        info = self.wait_until(lambda info: info["JobState"] == "COMPLETED", timeout, "COMPLETED")
        assert info["ExitCode"] == "0:0", self.failure(info)
        return info

    def wait_requeue_hold(self, timeout: float = 120) -> None:
        """Wait for the requeued job to be held on its BeginTime; the hold is cred_expire + 1 s
        from the requeue (SLURM resets SubmitTime then)."""
        info = self.wait_until(
            lambda info: info["JobState"] == "PENDING" and info["Reason"] == "BeginTime", timeout, "a requeue"
        )
        assert int(info["Restarts"]) >= 1
        hold = datetime.fromisoformat(info["EligibleTime"]) - datetime.fromisoformat(info["SubmitTime"])
        assert hold.total_seconds() == CRED_EXPIRE + 1, (info["SubmitTime"], info["EligibleTime"])

    def cancel(self) -> None:
        subprocess.run(["scancel", self.id], capture_output=True, timeout=30)


@pytest.fixture
def jobs(cluster):
    """Submits jobs; cancels what is left of them after the test."""
    submitted = []

    def submit(*args, **kwargs) -> Job:
        submitted.append(Job(*args, **kwargs))
        return submitted[-1]

    yield submit
    for job in submitted:
        job.cancel()


def show_config(env: dict[str, str] | None = None) -> dict[str, str]:
    """`scontrol show config` of the instance SLURM_CONF names, as a dict."""
    shown = subprocess.run(["scontrol", "show", "config"], env=env, capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    return {k.strip(): v.strip() for k, _, v in (line.partition(" = ") for line in shown.stdout.splitlines()) if v}


def test_the_instance_is_private(cluster):
    """Everything the instance uses is in its own directory: configuration, plugin stack, state,
    munge socket (with its own key); its ports are not SLURM's defaults; the machine's
    /etc/slurm and /etc/munge are as they were before it came up."""
    config = show_config()
    assert config["SLURM_CONF"] == str(SLURM_DIR / "slurm.conf")
    assert config["AuthInfo"].startswith(f"socket={SLURM_DIR}/munge/munge.socket")
    assert config["PlugStackConfig"] == str(SLURM_DIR / "plugstack.conf")
    assert config["StateSaveLocation"] == str(SLURM_DIR / "state")
    assert {config["SlurmctldPort"], config["SlurmdPort"]}.isdisjoint({"6817", "6818"})
    assert (SLURM_DIR / "munge" / "munge.key").stat().st_mode & 0o077 == 0
    assert system_slurm_files() == cluster


def test_another_slurm_beside_it_keeps_working(cluster, tmp_path):
    """A second SLURM on the same machine (another private instance: its own ports, munged and
    key) comes up beside the tier's; each runs the jobs submitted to it."""
    other = SLURM_DIR.with_name(SLURM_DIR.name + "-beside")
    try:
        local_slurm_up(other)
        other_env = {**os.environ, "SLURM_CONF": str(other / "slurm.conf")}
        ports = {show_config()["SlurmctldPort"], show_config(other_env)["SlurmctldPort"]}
        assert len(ports) == 2
        for name, env in (("ours", dict(os.environ)), ("other", other_env)):
            ran = subprocess.run(
                ["srun", "-n", "1", "--mem=100M", "printenv", "SLURM_CONF"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert ran.returncode == 0, ran.stderr
            assert ran.stdout.strip() == env["SLURM_CONF"], name
    finally:
        subprocess.run([str(LOCAL_SLURM), "down"], env=slurm_env(other), capture_output=True, timeout=120)
        shutil.rmtree(other, ignore_errors=True)


def test_a_configuration_it_did_not_write_is_left_alone(cluster, tmp_path):
    """local-slurm.sh refuses to take over a slurm.conf that is not its own, and says how to avoid it."""
    foreign = SLURM_DIR.with_name(SLURM_DIR.name + "-foreign")
    foreign.mkdir(exist_ok=True)
    try:
        (foreign / "slurm.conf").write_text("ClusterName=theirs\n")
        up = subprocess.run(
            [str(LOCAL_SLURM), "up"], env=slurm_env(foreign), capture_output=True, text=True, timeout=120
        )
        assert up.returncode != 0
        assert "was not written by this script; not touching it" in up.stderr and "LOCAL_SLURM_DIR" in up.stderr
        assert (foreign / "slurm.conf").read_text() == "ClusterName=theirs\n"
    finally:
        shutil.rmtree(foreign, ignore_errors=True)


@pytest.mark.parametrize(
    "script, launcher, resources",
    [
        ("single_node.sbatch", "srun", ["--ntasks=2"]),
        ("multi_node.sbatch", "srun", ["--nodes=1", "--ntasks-per-node=2"]),
        ("multi_node.sbatch", "mpiexec", ["--nodes=1", "--ntasks-per-node=2"]),
    ],
)
def test_a_run_completes(jobs, tmp_path, tiny_hyperparams, script, launcher, resources):
    job = jobs(tmp_path, script, launcher, tiny_hyperparams, *resources, steps=2000)
    job.wait_completed()
    assert generations_recorded(job.run_dir) == all_generations(3)
    log = job.log()
    assert log.count("new run") == 1 and "--resume" not in log
    assert f"evo: {launcher} " in log
    assert "help-pmix" not in log  # srun without PMIX_MCA_psec=native: one PMIx warning per rank


@pytest.mark.parametrize(
    "scope, launcher",
    [("--batch", "mpiexec"), ("--batch", "srun"), ("--full", "mpiexec"), ("--full", "srun")],
)
def test_usr1_checkpoints_requeues_and_resumes(jobs, tmp_path, scope, launcher):
    """scancel --batch: the script forwards USR1 to the launcher, which forwards it to the
    ranks. --full: every rank also gets it from SLURM directly, two or three times in all."""
    job = signalled_job(jobs, tmp_path, launcher)
    signal = subprocess.run(["scancel", "--signal=USR1", scope, job.id], capture_output=True, text=True, timeout=30)
    assert signal.returncode == 0, signal.stderr
    job.wait_requeue_hold()
    first_part = job.log()
    stopped = stopped_at(first_part, "SIGUSR1", SIGNALLED_GENERATIONS)
    assert stopped == 1  # held in generation 2 until the signal came
    assert "checkpoint written; requeueing job" in first_part  # the script saw exit status 75
    assert "while stopping" not in first_part and "aborting" not in first_part
    assert_completes_resumed_from(job, stopped)


def signalled_job(jobs, tmp_path: Path, launcher: str, **kwargs) -> Job:
    """A job of SIGNALLED_GENERATIONS generations on 2 tasks with ``launcher`` (``kwargs``: the
    job's other settings), once both its ranks are held at the gate in generation 2."""
    gate = tmp_path / "gate"
    gate.mkdir()
    job = jobs(
        tmp_path,
        "single_node.sbatch",
        launcher,
        write_hyperparams(tmp_path, TINY_DEFAULT),
        "--ntasks=2",
        steps=SIGNALLED_STEPS,
        generations=SIGNALLED_GENERATIONS,
        env_flags=gate_flags("CartPole-v1", SIGNALLED_STEPS // 2 + 100, gate),
        **kwargs,
    )
    job.wait_until(lambda info: len(held(gate, [0, 1])) == 2, 240, "both ranks at the gate in generation 2")
    return job


def assert_completes_resumed_from(job: Job, stopped: int) -> None:
    """The requeued job completes, its second part resumed from generation ``stopped``, and every
    generation is recorded once."""
    job.wait_completed()
    assert_resumed_from(job.log(), stopped)
    assert generations_recorded(job.run_dir) == all_generations(SIGNALLED_GENERATIONS)


def all_generations(generations: int) -> dict[int, list[int]]:
    return {generation: [0, 1] for generation in range(1, generations + 1)}


def stopped_at(log: str, signal: str, generations: int) -> int:
    """The generation whose checkpoint the stop on ``signal`` wrote: the last one complete when
    the signal came, at least 1 and before the last; the resumed part must start from it."""
    found = re.findall(rf"stopped by {signal}: checkpoint of generation (\d+) is in", log)
    assert len(found) == 1, log[-4000:]
    generation = int(found[0])
    assert 1 <= generation < generations, log[-4000:]
    return generation


def assert_resumed_from(log: str, generation: int) -> None:
    resumed = re.findall(r"resumed from \S+ \(generation (\d+)\)", log)
    assert resumed == [str(generation)], log[-4000:]


def preempt(job: Job, tmp_path: Path) -> str:
    """Submits a job to the urgent partition, which pre-empts ``job``; returns its id."""
    urgent = subprocess.run(
        ["sbatch", "--parsable", "-p", "urgent", "-n", "1", "--mem=100M", f"--output={tmp_path}/urgent-%j.out"]
        + ["--wrap", "echo urgent job ran"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert urgent.returncode == 0, urgent.stderr
    return urgent.stdout.strip()


def urgent_output(tmp_path: Path, urgent: str, timeout: float = 60) -> str:
    """The urgent job's output, once it has run (it starts when the pre-empted job has left)."""
    path = tmp_path / f"urgent-{urgent}.out"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.5)
    pytest.fail(f"the urgent job {urgent} wrote nothing to {path} in {timeout}s")


def preempted_within_the_grace_time(job: Job, tmp_path: Path) -> str:
    """Pre-empts ``job`` and waits for its requeue, which comes before the GraceTime ends: the job
    stopped by itself, not when the grace ended. Returns the urgent job's id."""
    preempted = time.monotonic()
    urgent = preempt(job, tmp_path)
    job.wait_until(lambda info: info["Restarts"] != "0", GRACE_TIME + 60, "the pre-emption's requeue")
    assert time.monotonic() - preempted < GRACE_TIME
    return urgent


def test_preemption_with_srun_checkpoints_within_the_grace_time(jobs, tmp_path):
    """The recommended setting: LAUNCHER=srun on a default SLURM. The pre-emption's SIGTERM
    reaches every rank: a checkpoint at once, well before the GraceTime ends."""
    job = signalled_job(jobs, tmp_path, "srun")
    urgent = preempted_within_the_grace_time(job, tmp_path)
    log = job.log()
    stopped = stopped_at(log, "SIGTERM", SIGNALLED_GENERATIONS)
    assert stopped == 1  # held in generation 2 until the signal came
    assert "checkpoint written; requeueing job" in log
    assert urgent_output(tmp_path, urgent) == "urgent job ran"
    job.wait_requeue_hold()
    assert_completes_resumed_from(job, stopped)


def test_an_asynchronous_run_preempted_with_srun_stops_in_its_interval_and_resumes(jobs, tmp_path):
    """--asynchronous: the pre-emption's SIGTERM reaches both ranks, held in their members' second
    interval; each member's first ready point is already checkpointed, the job requeues, and its next
    part resumes each member from it and records every (member, interval) once."""
    gate = tmp_path / "gate"
    gate.mkdir()
    job = jobs(
        tmp_path,
        "single_node.sbatch",
        "srun",
        write_hyperparams(tmp_path, TINY_DEFAULT),
        "--ntasks=2",
        steps=SIGNALLED_STEPS,
        generations=SIGNALLED_GENERATIONS,
        env_flags=[*gate_flags("CartPole-v1", SIGNALLED_STEPS // 2 + 100, gate), "--asynchronous"],
    )
    job.wait_until(lambda info: len(held(gate, [0, 1])) == 2, 240, "both ranks at the gate in interval 2")
    preempted_within_the_grace_time(job, tmp_path)
    log = job.log()
    assert "stopped by SIGTERM: every member's last ready point is checkpointed" in log, log[-4000:]
    assert "checkpoint written; requeueing job" in log
    assert generations_recorded(job.run_dir) == all_generations(1)
    job.wait_requeue_hold()
    job.wait_completed()
    assert "intervals done per member 0:1, 1:1" in job.log(), job.log()[-4000:]
    assert generations_recorded(job.run_dir) == all_generations(SIGNALLED_GENERATIONS)


def test_preemption_with_mpiexec_gets_no_warning_on_a_default_slurm(short_grace_time, jobs, tmp_path, tiny_hyperparams):
    """What the README warns of: SLURM 22.05 signals job steps only, so the batch script's
    mpiexec hears nothing until the GraceTime is over and the job is killed (SIGTERM to every
    process, then SIGKILL). The next part resumes from the last generation's checkpoint; no
    generation is recorded twice.

    The run is longer than the test (it must still be training when the GraceTime ends, on any
    machine): once the resumed part has recorded a generation of its own, USR1 stops it with a
    checkpoint and the test cancels the requeued job."""
    generations = 500
    job = jobs(
        tmp_path, "single_node.sbatch", "mpiexec", tiny_hyperparams, "--ntasks=2", steps=2048, generations=generations
    )
    job.wait_for_generation(1)
    preempted = time.monotonic()
    preempt(job, tmp_path)
    job.wait_until(lambda info: info["Restarts"] != "0", short_grace_time + 90, "the pre-emption's requeue")
    assert time.monotonic() - preempted >= short_grace_time - 1
    log = job.log()
    during_grace, killed, _ = log.partition("DUE TO PREEMPTION")
    assert killed, log[-4000:]
    assert "checkpoint written; requeueing job" not in log  # SLURM requeued it, not the script
    # nothing reached evo or the script while the GraceTime ran; SLURM's kill at its end starts
    # with SIGTERM to every process (SIGKILL follows after KillWait), which evo may act on in time
    assert "stopped by" not in during_grace and "pre-emption signal" not in during_grace, log[-4000:]
    job.wait_requeue_hold()
    resumed = job.wait_for_log(r"resumed from \S+ \(generation (\d+)\)")
    own = int(resumed.group(1)) + 1
    job.wait_for_log(rf"INFO gen {own}/{generations}  env steps/member", after=resumed.end())
    signal = subprocess.run(["scancel", "--signal=USR1", "--batch", job.id], capture_output=True, text=True, timeout=30)
    assert signal.returncode == 0, signal.stderr
    job.wait_until(lambda info: info["Restarts"] == "2", 120, "the USR1 stop's requeue")
    job.cancel()
    stopped = stopped_at(job.log(), "SIGUSR1", generations)
    assert stopped >= own
    assert generations_recorded(job.run_dir) == all_generations(stopped)


@pytest.mark.parametrize("launcher", ["mpiexec", "srun"])
def test_preemption_with_preempt_send_user_signal(preempt_send_user_signal, jobs, tmp_path, launcher):
    """With SlurmctldParameters=preempt_send_user_signal, the pre-emption sends the job's
    --signal=B:USR1 to the batch script at once, which forwards it to the launcher."""
    job = signalled_job(jobs, tmp_path, launcher)
    preempted_within_the_grace_time(job, tmp_path)
    log = job.log()
    assert "pre-emption signal, asking the job to checkpoint" in log
    stopped = stopped_at(log, "SIGUSR1", SIGNALLED_GENERATIONS)
    assert stopped == 1  # held in generation 2 until the signal came
    assert "checkpoint written; requeueing job" in log
    job.wait_requeue_hold()
    assert_completes_resumed_from(job, stopped)


def wait_for_array(job_id: str, tasks: int, timeout: float) -> list[str]:
    """Each task's final state and exit code, once every task of array job ``job_id`` has ended
    (polled every half second: `sbatch --wait` polls at growing intervals, up to tens of seconds
    after the last task ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=30)
        assert shown.returncode == 0, shown.stderr
        fields = [dict(f.split("=", 1) for f in line.split() if "=" in f) for line in shown.stdout.splitlines()]
        ended = [f for f in fields if f.get("JobState") not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")]
        if len(fields) == tasks and len(ended) == tasks:
            ordered = sorted(ended, key=lambda f: int(f["ArrayTaskId"]))
            return [f"{f['JobState']} {f['ExitCode']}" for f in ordered]
        time.sleep(0.5)
    pytest.fail(f"array job {job_id}: its {tasks} tasks had not ended after {timeout}s")


def test_the_comparison_study_runs_as_a_slurm_array(cluster, tmp_path):
    """docs/results.md's cluster recipe: one array task per (method, seed) run with
    `compare.py --job $SLURM_ARRAY_TASK_ID`, then `--report-only` builds the table."""
    import json
    import sys

    out = tmp_path / "study"
    study = [sys.executable, "experiments/compare.py", "--study", "continuous", "--envs", "Pendulum-v1"]
    study += ["--methods", "pbt", "zoo", "--seeds", "0", "--generations", "1", "--steps", "2048"]
    study += ["--eval-episodes", "1", "--out", str(out)]
    listed = subprocess.run([*study, "--list"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 2, listed.stderr
    wrap = " ".join(study) + " --job $SLURM_ARRAY_TASK_ID"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--array=0-1", "--ntasks=2", "--mem=3G", "--time=10"]
        + [f"--output={tmp_path}/task-%a.out", "--wrap", wrap],
        cwd=ROOT,
        env=mpi_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    states = wait_for_array(submitted.stdout.strip().split(";")[0], tasks=2, timeout=600)
    logs = "\n".join(path.read_text()[-2000:] for path in sorted(tmp_path.glob("task-*.out")))
    assert states == ["COMPLETED 0:0", "COMPLETED 0:0"], logs
    for method in ("pbt", "zoo"):
        assert (out / "runs" / "Pendulum-v1" / f"{method}-seed0" / "wall_s").is_file(), logs
    assert not (out / "results.md").exists()  # each task ran its own run only
    report = subprocess.run([*study, "--report-only"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert sorted(r["method"] for r in json.loads((out / "results.json").read_text())) == ["pbt", "zoo"]
