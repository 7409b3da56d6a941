"""Flower's deployment runtime on this machine: a SuperLink and one SuperNode per silo, each a separate
process talking over loopback (Flower 1.41 serves its Fleet API over HTTP), then ``flwr run`` of a
small Flower App whose components are :data:`gpuanon.federated.server_app.app` and
:data:`gpuanon.federated.client_app.app`.

Each SuperNode is told its own data by its node configuration (``silo=<i> data-path='<file>'``): the
silo's rows are written to a file of their own and only that node reads it. The server side reads
the held-out rows (``test-path``). Every process is started here and stopped when the run ends
(or on error / timeout). For silos on separate machines with TLS, see docs/federate.md.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..errors import InputError
from .experiment import write_silo_files

log = logging.getLogger("gpuanon")

_APP_PYPROJECT = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "gpuanon-federated"
version = "1.0.0"
description = "gpuanon's federated learning over protected silos"
license = "Apache-2.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "gpuanon"

[tool.flwr.app.components]
serverapp = "gpuanon_fl_app:server"
clientapp = "gpuanon_fl_app:client"

[tool.flwr.app.config]
experiment = ""
"""

_APP_MODULE = '''"""The Flower App of gpuanon's federated learning (gpuanon must be installed where it runs)."""
from gpuanon.federated import client_app as _client_app
from gpuanon.federated import server_app as _server_app

server = _server_app.app
client = _client_app.app
'''


def write_app(folder) -> Path:
    """The Flower App directory that ``flwr run`` ships (a FAB): two components, one config key."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(_APP_PYPROJECT)
    (folder / "gpuanon_fl_app.py").write_text(_APP_MODULE)
    return folder


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _wait_port(port: int, timeout: float, procs) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("a Flower process exited while starting")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.25)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def _bin(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    if exe.exists():
        return str(exe)
    found = shutil.which(name)
    if not found:
        raise InputError(f"'{name}' is not installed; pip install 'flwr[simulation]==1.41.0'")
    return found


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            p.wait(timeout=5)


def run_deployment(cfg: dict, timeout: float = 1800.0, keep_dir: str | None = None) -> dict:
    """Run the experiment on Flower's deployment runtime over loopback; return the server's report
    (with ``runtime.processes``: the pids and commands that ran)."""
    work = Path(keep_dir or tempfile.mkdtemp(prefix="gpuanon-fl-deploy-"))
    work.mkdir(parents=True, exist_ok=True)
    n = int(cfg["silos"])
    silo_paths, test_path = write_silo_files(cfg, work / "data")
    result = work / "result.json"
    c = dict(cfg, result_path=str(result), test_path=test_path, wait_nodes_s=120)
    app_dir = write_app(work / "app")
    home = work / "flwr-home"
    home.mkdir(exist_ok=True)
    fleet, *node_ports = _free_ports(1 + n)
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "gpuanon"\n\n[superlink.gpuanon]\naddress = "127.0.0.1:{fleet}"\ninsecure = true\n')
    (work / "run-config.toml").write_text("experiment = " + json.dumps(json.dumps(c)) + "\n")
    # the SuperLink starts flower-superexec from PATH: this interpreter's scripts first (a venv not activated)
    path = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), os.environ.get("PATH")]))
    env = dict(os.environ, FLWR_HOME=str(home), PYTHONUNBUFFERED="1", PATH=path)
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    procs: list = []
    t0 = time.perf_counter()

    def start(name, args):
        f = open(logs / f"{name}.log", "w")
        p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=str(work),
                             start_new_session=True)
        procs.append(p)
        return p

    try:
        # Flower 1.41 serves the Fleet, Control and runtime APIs over HTTP on one host:port
        start("superlink", [_bin("flower-superlink"), "--insecure", "--database", str(work / "state.db"),
                            "--host", "127.0.0.1", "--port", str(fleet)])
        _wait_port(fleet, 90, procs)
        for i in range(n):
            start(f"supernode{i}", [_bin("flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{fleet}",
                                    "--host", "127.0.0.1", "--port", str(node_ports[i]),
                                    "--node-config", f"silo={i} data-path='{silo_paths[i]}'"])
        for i in range(n):
            _wait_port(node_ports[i], 90, procs)
        run = subprocess.run([_bin("flwr"), "run", str(app_dir), "gpuanon", "--run-config",
                              str(work / "run-config.toml")], env=env, cwd=str(work), capture_output=True,
                             text=True, timeout=120)
        (logs / "flwr-run.log").write_text(run.stdout + run.stderr)
        if run.returncode != 0:
            raise RuntimeError(f"flwr run failed: {(run.stdout + run.stderr)[-2000:]}")
        deadline = time.monotonic() + timeout
        while not result.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no result within {timeout:.0f} s; logs in {logs}")
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a Flower process exited early (status {dead[0].returncode}); logs in {logs}")
            time.sleep(0.5)
        time.sleep(0.2)
        doc = json.loads(result.read_text())
        doc["runtime"] = {"name": "deployment", "transport": "Flower 1.41 Fleet API (HTTP) over loopback",
                          "processes": [{"pid": p.pid, "command": Path(p.args[0]).name} for p in procs],
                          "seconds_with_startup": round(time.perf_counter() - t0, 3)}
        return doc
    finally:
        _stop(procs)
        if keep_dir is None:
            shutil.rmtree(work, ignore_errors=True)
