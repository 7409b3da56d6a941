"""A real Dask cluster for the fault tests: a ``dask scheduler`` and ``dask worker`` processes on
127.0.0.1 (each in its own process group, so that a worker's nanny and the worker it spawned are
ended together), and the hook that kills one of them as a run enters a stage."""

import os
import signal
import socket
import subprocess
import sys
import time
import warnings

DASK = os.path.join(os.path.dirname(sys.executable), "dask")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Cluster:
    """A scheduler and ``n`` one-thread worker processes, a client. Without ``memory_limit`` the
    workers run without a nanny (a killed worker stays dead); with it (e.g. ``"300MB"``) each has its
    nanny, which kills it over 95 % of the limit and starts it again; ``env``: the workers' extra
    environment (e.g. Dask's configuration)."""

    def __init__(self, n: int, memory_limit: str | None = None, client: bool = True, env: dict | None = None):
        self.addr = f"tcp://127.0.0.1:{free_port()}"
        self.n, self.memory_limit, self.env = n, memory_limit, env
        self.scheduler = self._start("scheduler", "--host", "127.0.0.1", "--port", self.addr.rsplit(":", 1)[1],
                                     "--no-dashboard")
        self.workers = []
        self.client = None
        self.top_up()
        from distributed import Client

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.client = Client(self.addr, timeout="120s")
        self.client.wait_for_workers(n, timeout=120)
        if not client:  # the run connects by itself (a command): only the workers' start was waited for
            self.client.close()
            self.client = None

    @staticmethod
    def _start(*args, env=None):
        return subprocess.Popen([DASK, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, env=None if env is None else dict(os.environ, **env))

    def live(self):
        return [w for w in self.workers if w.poll() is None]

    def top_up(self):
        how = ["--no-nanny"] if self.memory_limit is None else ["--memory-limit", self.memory_limit]
        for _ in range(self.n - len(self.live())):
            self.workers.append(self._start("worker", self.addr, "--nthreads", "1", "--no-dashboard", *how,
                                            env=self.env))
        if self.client is not None:
            self.client.wait_for_workers(self.n, timeout=120)
            while len(self.client.sync(self.client.scheduler.identity, n_workers=-1)["workers"]) > self.n:
                time.sleep(0.2)  # a killed worker the scheduler has not let go of yet

    def pid_of(self, addr):
        return self.client.run(os.getpid, workers=[addr])[addr]

    def close(self):
        if self.client is not None:
            self.client.close()
        for p in self.workers + [self.scheduler]:  # each process group: a nanny and its worker together
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


class Killer:
    """``on_stage`` hook: SIGKILL the worker of slot ``slot`` (or the scheduler) the first ``times``
    times the run enters a stage whose name starts with ``stage``; ``run`` is the run's Runner."""

    def __init__(self, cluster, stage, slot=1, times=1, what="worker"):
        self.cl, self.stage, self.slot, self.times, self.what = cluster, stage, slot, times, what
        self.run, self.killed, self.at = None, [], None

    def __call__(self, name):
        if len(self.killed) >= self.times or not name.startswith(self.stage):
            return
        if self.what == "scheduler":
            self.cl.scheduler.send_signal(signal.SIGKILL)
        else:
            addr = self.run.workers[self.slot]
            os.kill(self.cl.pid_of(addr), signal.SIGKILL)
        self.killed.append(name)
        self.at = time.monotonic()


def note(case: str, fault: str, outcome: str, secs: float) -> None:
    """One row of the fault matrix (docs/cluster.md), appended to $GPUANON_FAULT_MATRIX when set."""
    path = os.environ.get("GPUANON_FAULT_MATRIX")
    if path:
        with open(path, "a") as f:
            f.write(f"| {case} | {fault} | {outcome} | {secs:.1f} |\n")
