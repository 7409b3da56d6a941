"""Running an experiment: the configuration, Flower's simulation runtime, and the comparison grid."""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
import warnings
from pathlib import Path

from ..datasets import get_dataset
from ..errors import InputError
from ..evaluate import parse_protection
from .deployment import run_deployment
from .diagnose import note_one_class
from .experiment import plan
from .models import model_spec
from .splits import SPLITS

log = logging.getLogger("gpuanon")

RUNTIMES = ("simulation", "deployment")


def make_config(dataset: str | None = None, input: str | None = None, *, target: str | None = None,
                qi=None, sensitive: str | None = None, identifiers=None, numeric=None, categorical=None,
                rows: int | None = None, silos: int = 3, split: str = "iid", alpha: float = 0.5,
                protection: str = "raw", model: str = "mlp", rounds: int = 20, local_epochs: int = 3,
                learning_rate: float | None = None, batch_size: int | None = None, momentum: float | None = None,
                test_size: float = 0.3, seed: int = 0, device: str | None = "cpu", max_suppression: float = 0.01,
                positive=None, test_mapping: bool = False, torch_threads: int = 1,
                categories: dict | None = None, class_weight: str | None = "balanced", sep: str | None = None,
                na_values=None, dates=None) -> dict:
    """The experiment as a JSON-ready dict (what the server and every silo agree on). ``sep``,
    ``na_values`` (cells that mean missing besides empty ones) and ``dates`` (columns read as dates)
    are how every reader of a CSV / TSV input reads it (:func:`.experiment.reader_options`)."""
    if not dataset and not input:
        raise InputError("no data: give an input file or --dataset adult")
    text_opts = [o for o, v in (("--sep", sep), ("--na-values", na_values), ("--dates", dates)) if v]
    if input and text_opts and str(input).lower().endswith((".parquet", ".pq")):  # as load_table refuses them
        raise InputError(f"{text_opts[0]} applies to CSV / TSV input; {str(input)!r} is Parquet, whose columns keep "
                         f"their types: leave {text_opts[0]} out")
    roles = {}
    if dataset and not input:
        _, roles = get_dataset(dataset, rows=1 if dataset.lower() != "hepmass" else 10)  # roles only
    target = target or roles.get("target")
    if not target:
        raise InputError("no target column given; pass --target COLUMN")
    qi = list(qi or roles.get("quasi_identifiers") or [])
    prot = parse_protection(protection)
    if prot.kind in ("mondrian", "suppress") and not qi:
        raise InputError("a Mondrian protection needs quasi-identifiers; pass --qi COL1,COL2,...")
    if int(silos) < 1:
        raise InputError(f"--silos must be at least 1, got {silos}")
    if int(rounds) < 1 or int(local_epochs) < 1:
        raise InputError("--rounds and --local-epochs must be at least 1")
    if str(split).lower() not in SPLITS:
        raise InputError(f"--split must be one of {', '.join(SPLITS)}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (math.isfinite(alpha) and alpha > 0):
        raise InputError(f"--alpha must be a positive number (the Dirichlet concentration of --split dirichlet), "
                         f"got {alpha:g}; e.g. --alpha 0.5")
    if test_mapping and prot.kind not in ("mondrian",):
        raise InputError("--test-mapping applies to a Mondrian protection (k=...)")
    spec = model_spec(model, learning_rate, batch_size, momentum, class_weight)
    if input:
        input = str(Path(input).resolve())
    return {"dataset": dataset, "input": input, "sep": sep, "na_values": list(na_values or []),
            "dates": list(dates or []), "rows": rows, "data_seed": 0, "target": target, "qi": qi,
            "sensitive": sensitive or roles.get("sensitive") or target, "identifiers": list(identifiers or []),
            "numeric": list(numeric or []), "categorical": list(categorical or []), "test_size": float(test_size),
            "seed": int(seed), "silos": int(silos), "split": str(split).lower(), "alpha": float(alpha),
            "protection": prot.name, "model": spec.to_dict(), "rounds": int(rounds),
            "local_epochs": int(local_epochs), "device": device, "max_suppression": float(max_suppression),
            "positive": None if positive is None else str(positive), "test_mapping": bool(test_mapping),
            "torch_threads": int(torch_threads), "categories": categories or None}


def run_simulation(cfg: dict, gpus_per_client: float = 0.0, cpus_per_client: float | None = None,
                   verbose: bool = False) -> dict:
    """Flower's simulation runtime: one virtual SuperNode per silo (Ray actors), the ServerApp in this
    process. Returns the server's report.

    ``cpus_per_client``: Ray's CPU share of each client; by default 1 (each client's PyTorch uses one
    thread), so at most as many silos train at once as there are cores: Ray starts one worker process
    per concurrent client, and more of them than cores only share the cores (the server takes the
    replies sorted by silo, so the result is the same)."""
    from flwr.simulation import run_simulation as flwr_run_simulation  # noqa: PLC0415

    from .client_app import app as client_app  # noqa: PLC0415
    from .server_app import make_server_app  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="gpuanon-fl-") as tmp:
        out = Path(tmp) / "result.json"
        c = dict(cfg, result_path=str(out))
        if gpus_per_client and not c.get("device"):
            c["device"] = "cuda"
        ncpu = os.cpu_count() or 1
        if cpus_per_client is None:
            cpus_per_client = 1.0
        backend_config = {"client_resources": {"num_cpus": float(min(cpus_per_client, ncpu)),
                                               "num_gpus": float(gpus_per_client)},
                          "init_args": {"num_cpus": ncpu, "include_dashboard": False, "log_to_driver": verbose,
                                        "logging_level": "error"}}
        t0 = time.perf_counter()
        flwr_log = logging.getLogger("flwr")
        level = flwr_log.level
        if not verbose:  # Flower's per-round lines; gpuanon logs its own round line
            flwr_log.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray\..*")  # Ray's tip on GPUs
                flwr_run_simulation(server_app=make_server_app(c), client_app=client_app,
                                    num_supernodes=int(c["silos"]), backend_config=backend_config,
                                    verbose_logging=verbose)
        finally:
            flwr_log.setLevel(level)
        if not out.exists():
            raise RuntimeError("the federated run ended without a result (see the log above for the silo's error)")
        doc = json.loads(out.read_text())
        doc["runtime"] = {"name": "simulation", "gpus_per_client": gpus_per_client,
                          "seconds_with_startup": round(time.perf_counter() - t0, 3)}
        return doc


def run_federated(cfg: dict, runtime: str = "simulation", gpus_per_client: float = 0.0, warn: bool = True,
                  **kw) -> dict:
    """One federated run; the report gets ``warnings`` (logged with ``warn``) when the global model
    predicts one class (:mod:`.diagnose`)."""
    plan(cfg)  # the table read and split here first: its errors (silos, alpha, target) before any simulation
    if runtime == "simulation":
        doc = run_simulation(cfg, gpus_per_client=gpus_per_client, **kw)
    elif runtime == "deployment":
        doc = run_deployment(cfg, **kw)
    else:
        raise InputError(f"runtime '{runtime}' is not one of {', '.join(RUNTIMES)}")
    note_one_class(cfg["protection"], doc, warn=warn)
    return doc

