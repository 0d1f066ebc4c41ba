"""Stop signals, sent for real to this process: repeats of a scheduler's signal never
abort a graceful stop; a second Ctrl-C (SIGINT) does. (A stop in another process, and in a
real run under mpiexec: tests/e2e/test_stopping_runs.py.)"""

import os
import signal
import time

import pytest

from evo.runner.stopping import StopRequest


@pytest.fixture
def stop_request():
    request = StopRequest().install()
    yield request
    request.uninstall()


def send(signum):
    os.kill(os.getpid(), signum)
    time.sleep(0.01)  # Python runs the handler at the next bytecode boundary of the main thread


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM])
def test_the_same_signal_again_does_not_abort(stop_request, signum):
    send(signum)  # from SLURM (scancel --full) ...
    send(signum)  # ... forwarded again by mpiexec ...
    send(signum)  # ... and by the batch script
    assert stop_request.requested and stop_request.signal_name == signum.name
    assert stop_request.repeats == 2


def test_usr1_then_term_keeps_the_first_signal(stop_request):
    send(signal.SIGUSR1)
    send(signal.SIGTERM)
    assert stop_request.signal_name == "SIGUSR1" and stop_request.repeats == 1


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGUSR1, signal.SIGTERM])
def test_sigint_while_stopping_aborts(stop_request, first):
    send(first)
    with pytest.raises(KeyboardInterrupt, match="SIGINT while stopping"):
        send(signal.SIGINT)


def test_one_signal_only_records(stop_request):
    assert not stop_request.requested
    send(signal.SIGINT)
    assert stop_request.requested and stop_request.signal_name == "SIGINT" and stop_request.repeats == 0


def test_uninstall_restores_the_previous_handlers():
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    StopRequest().install().uninstall()
    assert {s: signal.getsignal(s) for s in before} == before
