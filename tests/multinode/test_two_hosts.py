"""Two hosts over TCP: two network + UTS namespaces joined by a veth pair, each with its own
hostname and address. mpiexec runs on host A and reaches host B through its ssh agent
setting (PRTE_MCA_plm_ssh_agent), a script that enters B's namespaces instead of ssh. A PBT
run with rank 0 on A and rank 1 on B must record the same population.csv as the same seed
on one host. All traffic stays inside the namespaces the test creates."""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT, TINY_CARTPOLE, mpi_env, mpiexec, read_population, write_hyperparams

SUBNET = "10.213.77"
HOSTS = {"hostA": f"{SUBNET}.1", "hostB": f"{SUBNET}.2"}


def ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, f"ip {' '.join(args)}: {result.stderr}"


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory):
    """{hostname: (namespace, address)} for two namespaces joined by a veth pair."""
    if os.geteuid() != 0:
        pytest.skip("creating network namespaces needs root")
    if not (shutil.which("ip") and shutil.which("unshare")):
        pytest.skip("needs ip (iproute2) and unshare (util-linux)")
    tag = f"evo{os.getpid() % 100000}"
    namespaces = {"hostA": f"{tag}a", "hostB": f"{tag}b"}
    for namespace in namespaces.values():
        probe = subprocess.run(["ip", "netns", "add", namespace], capture_output=True, text=True)
        if probe.returncode != 0:
            pytest.skip(f"cannot create a network namespace here: {probe.stderr.strip()}")
    try:
        veth = {"hostA": f"{tag}x", "hostB": f"{tag}y"}  # interface names: at most 15 characters
        ip("link", "add", veth["hostA"], "type", "veth", "peer", "name", veth["hostB"])
        for host, namespace in namespaces.items():
            ip("link", "set", veth[host], "netns", namespace)
            ip("-n", namespace, "addr", "add", f"{HOSTS[host]}/24", "dev", veth[host])
            ip("-n", namespace, "link", "set", "lo", "up")
            ip("-n", namespace, "link", "set", veth[host], "up")
        yield {host: (namespaces[host], HOSTS[host]) for host in HOSTS}
    finally:
        for namespace in namespaces.values():  # deleting a namespace deletes its end of the veth
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def enter(namespace: str, hostname: str, command: str) -> list[str]:
    """argv that runs the shell ``command`` as host ``hostname``: in its network namespace,
    in a new UTS namespace with that hostname."""
    return ["ip", "netns", "exec", namespace, "unshare", "--uts", "/bin/sh", "-c", f"hostname {hostname} && {command}"]


@pytest.fixture(scope="module")
def ssh_agent(two_hosts, tmp_path_factory) -> Path:
    """What Open MPI calls instead of ssh: `agent ADDRESS COMMAND...`."""
    agent = tmp_path_factory.mktemp("agent") / "netns-ssh"
    cases = "\n".join(
        f'    {address}) exec ip netns exec {namespace} unshare --uts /bin/sh -c "hostname {host} && $*" ;;'
        for host, (namespace, address) in two_hosts.items()
    )
    agent.write_text(
        "#!/bin/sh\n"
        'address="$1"; shift\n'
        'case "$address" in\n'
        f"{cases}\n"
        '    *) echo "netns-ssh: unknown host $address" >&2; exit 255 ;;\n'
        "esac\n"
    )
    agent.chmod(0o755)
    return agent


def mpiexec_on_two_hosts(two_hosts, agent: Path, args: list[str], timeout: float = 300):
    """``python ARGS`` with rank 0 on hostA (where mpiexec runs) and rank 1 on hostB."""
    namespace, _ = two_hosts["hostA"]
    hosts = ",".join(f"{address}:1" for _, address in two_hosts.values())
    subnet = f"{SUBNET}.0/24"
    command = " ".join(
        [
            str(Path(sys.executable).parent / "mpiexec"),
            f"--host {hosts} -n 2 --bind-to none",
            f"--mca btl_tcp_if_include {subnet} --mca oob_tcp_if_include {subnet}",
            sys.executable,
            *(f"'{arg}'" for arg in args),
        ]
    )
    env = {**mpi_env(), "PRTE_MCA_plm_ssh_agent": str(agent)}
    job = subprocess.Popen(
        enter(namespace, "hostA", f"cd {ROOT} && exec {command}"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # mpiexec, the agent and host B's daemon: one group to kill
    )
    try:
        stdout, stderr = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        stdout, stderr = job.communicate()
        pytest.fail(f"mpiexec on two hosts timed out after {timeout}s\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(job.args, job.returncode, stdout, stderr)


def test_ranks_run_on_two_hosts(two_hosts, ssh_agent):
    probe = (
        "import socket; from mpi4py import MPI; c = MPI.COMM_WORLD; "
        "print(c.Get_rank(), socket.gethostname(), c.allreduce(c.Get_rank() + 1))"
    )
    result = mpiexec_on_two_hosts(two_hosts, ssh_agent, ["-c", probe], timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["0 hostA 3", "1 hostB 3"]  # the allreduce went over TCP


def test_pbt_on_two_hosts_records_what_one_host_does(two_hosts, ssh_agent, tmp_path, tiny_hyperparams):
    args = ["pbt_rl_truct.py", "--env-id", "CartPole-v1", "--hyperparams", str(tiny_hyperparams)]
    args += ["--total-generations", "3", "--agent-training-steps", "512", "--seed", "5"]
    one = mpiexec(2, [*args, "--run-dir", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    two = mpiexec_on_two_hosts(two_hosts, ssh_agent, [*args, "--run-dir", str(tmp_path / "two")])
    assert two.returncode == 0, two.stderr[-3000:]
    assert "[0@hostA]" in two.stdout + two.stderr
    population = (tmp_path / "one" / "population.csv").read_text()
    assert len(population.splitlines()) == 1 + 3 * 2
    assert (tmp_path / "two" / "population.csv").read_text() == population


def test_asynchronous_transport_on_two_hosts(two_hosts, ssh_agent):
    """Asynchronous PBT's coordinator and service threads over TCP (evo.mpi.asynchronous): its
    MPI-tier tests, a donor's snapshot served while its main thread is held included, pass with
    rank 1 on another host (a passive side progresses only when it enters MPI: the service
    thread's polling is what makes it progress)."""
    tests = ["-m", "mpi4py", "-m", "pytest", "tests/mpi/ranks/test_asynchronous.py", "-q", "-p", "no:cacheprovider"]
    result = mpiexec_on_two_hosts(two_hosts, ssh_agent, [*tests, "--timeout=120", "--color=no"], timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    assert result.stdout.count(" passed") == 2 and "failed" not in result.stdout, result.stdout[-2000:]


def test_an_asynchronous_run_on_two_hosts_records_every_member_interval_once(two_hosts, ssh_agent, tmp_path):
    """pbt_rl_truct.py --asynchronous with rank 1 on host B: snapshots, whole members and the
    coordinator's messages over TCP; every (member, interval) recorded once, by both hosts' ranks."""
    hyperparams = write_hyperparams(tmp_path, TINY_CARTPOLE)
    args = ["pbt_rl_truct.py", "--asynchronous", "--env-id", "CartPole-v1", "--hyperparams", str(hyperparams)]
    args += ["--num-agents", "4", "--total-generations", "3", "--agent-training-steps", "256", "--seed", "5"]
    result = mpiexec_on_two_hosts(two_hosts, ssh_agent, [*args, "--run-dir", str(tmp_path / "run")])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[0@hostA]" in result.stdout + result.stderr
    rows = read_population(tmp_path / "run")
    assert sorted((int(r["member"]), int(r["generation"])) for r in rows) == [
        (m, i) for m in range(4) for i in range(1, 4)
    ]
    assert {r["rank"] for r in rows} == {"0", "1"}
