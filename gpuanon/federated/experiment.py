"""The experiment's data plan, shared by the server side and every silo.

A silo knows where its rows are from its node configuration: ``data-path`` (a CSV / Parquet file
of its own rows: the deployment runtime, separate machines) or ``partition-id`` (simulation: the
silo recomputes the seeded split of a named dataset and keeps only its part, as Flower's
partitioned-dataset examples do). The server side holds the raw held-out test rows (``test-path``,
or the same seeded split) and never a silo's rows.

The split is the evaluation's (SPEC 9): one stratified, seeded train / test split of the original
table (70 / 30 by default); the training part is then split into silos (:mod:`.splits`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..datasets import ColumnTypes, get_dataset, load_table
from ..errors import InputError, SchemaError
from ..evaluate import stratified_split
from .splits import split_silos


def experiment_key(cfg: dict) -> str:
    keys = ("dataset", "input", "sep", "na_values", "dates", "rows", "data_seed", "target", "test_size", "seed",
            "silos", "split", "alpha")
    return json.dumps({k: cfg.get(k) for k in keys}, sort_keys=True, default=str)


def reader_options(cfg: dict, path) -> dict:
    """:func:`~gpuanon.datasets.load_table`'s keywords for ``path``: for a CSV / TSV file the
    experiment's ``--sep``, ``--na-values`` and ``--dates``; none for a Parquet file (the
    deployment's silo files), which is read as it is."""
    if str(path).lower().endswith((".parquet", ".pq")):
        return {}
    return dict(sep=cfg.get("sep"), na_values=list(cfg.get("na_values") or []) or None,
                types=ColumnTypes(dates=set(cfg.get("dates") or [])))


def load_frame(cfg: dict) -> pd.DataFrame:
    if cfg.get("input"):
        return load_table(cfg["input"], **reader_options(cfg, cfg["input"]))
    if not cfg.get("dataset"):
        raise InputError("no data: give an input file or a dataset name")
    df, _ = get_dataset(cfg["dataset"], rows=cfg.get("rows"), seed=int(cfg.get("data_seed") or 0))
    return df


@dataclass
class Plan:
    train: pd.DataFrame
    test: pd.DataFrame
    silos: list          # row positions of each silo in ``train``
    classes: list        # target values, sorted (the label codes)


@functools.lru_cache(maxsize=4)
def _plan(key: str) -> Plan:
    cfg = json.loads(key)
    df = load_frame(cfg).reset_index(drop=True)
    target = cfg["target"]
    if target not in df.columns:
        raise SchemaError(f"target column '{target}' is not in the table; columns: {', '.join(map(str, df.columns))}")
    sp = stratified_split(df, target, float(cfg.get("test_size", 0.3)), int(cfg.get("seed", 0)))
    silos = split_silos(sp.y[sp.idx_train], int(cfg["silos"]), cfg.get("split", "iid"), float(cfg.get("alpha", 0.5)),
                        seed=int(cfg.get("seed", 0)))
    return Plan(sp.train, sp.test, silos, [str(c) for c in sp.classes])


def plan(cfg: dict) -> Plan:
    """The seeded split of the experiment (cached per process)."""
    return _plan(experiment_key(cfg))


def silo_rows(cfg: dict, node_config: dict) -> tuple[int, pd.DataFrame]:
    """``(silo index, the silo's raw rows)``, as the silo itself loads them."""
    silo = int(node_config.get("silo", node_config.get("partition-id", -1)))
    path = node_config.get("data-path")
    if path:
        return silo, load_table(str(path), **reader_options(cfg, path))
    if silo < 0:
        raise InputError("this node has neither a data-path nor a partition-id in its node configuration; "
                         "start it with --node-config \"silo=0 data-path='silo0.csv'\"")
    p = plan(cfg)
    if silo >= len(p.silos):
        raise InputError(f"partition-id {silo} is out of range for {len(p.silos)} silos")
    return silo, p.train.iloc[p.silos[silo]].reset_index(drop=True)


def test_rows(cfg: dict) -> pd.DataFrame:
    """The raw held-out rows, on the server side."""
    if cfg.get("test_path"):
        return load_table(cfg["test_path"], **reader_options(cfg, cfg["test_path"]))
    return plan(cfg).test


def write_silo_files(cfg: dict, folder) -> tuple[list[str], str]:
    """Each silo's rows and the test rows as Parquet files in ``folder`` (for the deployment runtime)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    p = plan(cfg)
    paths = []
    for i, idx in enumerate(p.silos):
        f = folder / f"silo{i}.parquet"
        p.train.iloc[idx].reset_index(drop=True).to_parquet(f, index=False)
        paths.append(str(f))
    t = folder / "test.parquet"
    p.test.to_parquet(t, index=False)
    return paths, str(t)
