"""What crosses the network between the server and the silos, and nothing else.

Every record a silo may send is listed in :data:`OUTBOUND` (per message type); :func:`check_outbound`
refuses anything else before it leaves the node. The reductions shared by the silos are written as
chunk / combine / finalize (feature moments for the scaler; DISTPAB's statistics use
:mod:`gpuanon.perturb.distpab`'s own), and FedAvg is :func:`fedavg`, an exact float64 weighted mean.

>>> import numpy as np
>>> a = [np.array([1.0, 2.0], dtype=np.float32)]; b = [np.array([3.0, 6.0], dtype=np.float32)]
>>> fedavg([a, b], [1, 3])[0].tolist()
[2.5, 5.0]
>>> c1, c2 = moments_chunk(np.array([[1.0], [3.0]])), moments_chunk(np.array([[5.0], [np.nan]]))
>>> mean, std = moments_finalize(moments_combine([c1, c2]))
>>> float(mean[0]), round(float(std[0]), 6)
(3.0, 1.632993)
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import InputError
from ..evaluate import FeatureSpace, cell_texts, parse_protection
from ..perturb.distpab import PerturbParams, Stats
from ..perturb.stats import merge_moments

#: For each message type, the records a silo's reply may hold: name -> (record kind, allowed keys).
OUTBOUND = {
    "query.prepare": {"silo": ("metric", {"silo", "rows", "rows-in", "suppressed", "classes", "entropy-loss", "ncp"}),
                      "categories": ("config", {"kinds", "values"}),
                      "distpab-stats": ("array", {"n", "mean", "comoment"}),
                      "mapping": ("config", {"ecs"})},
    "query.encode": {"moments": ("array", {"n", "mean", "m2"}),
                     "silo": ("metric", {"silo", "rows", "features"})},
    "train": {"arrays": ("array", None),
              "metrics": ("metric", {"num-examples", "train-loss", "silo"})},
}


class ProtocolError(InputError):
    """A silo tried to send something the protocol does not allow."""


def _kind(rec) -> str:
    name = type(rec).__name__
    return {"ArrayRecord": "array", "MetricRecord": "metric", "ConfigRecord": "config"}.get(name, name)


def check_outbound(message_type: str, content) -> None:
    """Raise :class:`ProtocolError` unless ``content`` holds only the records allowed for the reply to
    ``message_type``: weight arrays, sample counts, statistics (never a table's rows)."""
    allowed = OUTBOUND.get(message_type)
    if allowed is None:
        raise ProtocolError(f"no reply is allowed to a '{message_type}' message")
    for name, rec in content.items():
        if name not in allowed:
            raise ProtocolError(f"record '{name}' is not allowed in a reply to '{message_type}'")
        kind, keys = allowed[name]
        if _kind(rec) != kind:
            raise ProtocolError(f"record '{name}' must be a {kind} record, got {type(rec).__name__}")
        if keys is not None and not set(rec.keys()) <= keys:
            raise ProtocolError(f"record '{name}' carries {sorted(set(rec.keys()) - keys)}, not allowed")
        if kind == "array":
            for key, a in rec.items():
                if a.dtype not in ("float32", "float64", "<f4", "<f8") and "float" not in str(a.dtype):
                    raise ProtocolError(f"array '{name}/{key}' is {a.dtype}; only float weights and statistics "
                                        "may leave a silo")
        if name == "distpab-stats":
            d = rec["mean"].shape[0]
            if tuple(rec["comoment"].shape) != (d, d) or tuple(rec["n"].shape) != (1,):
                raise ProtocolError("DISTPAB statistics must be n (1,), mean (d,), comoment (d, d)")
        if name == "moments":
            shapes = {tuple(a.shape) for a in rec.values()}
            if len(shapes) != 1 or len(shapes.pop()) != 1:
                raise ProtocolError("feature moments must be three vectors of one length")


def describe(content) -> dict:
    """What a message carries, without the values: record name -> kind, keys, array shapes and dtypes."""
    out = {}
    for name, rec in content.items():
        kind = _kind(rec)
        d = {"kind": kind, "keys": sorted(rec.keys()), "bytes": int(rec.count_bytes())}
        if kind == "array":
            d["shapes"] = [list(a.shape) for a in rec.values()]
            d["dtypes"] = sorted({str(a.dtype) for a in rec.values()})
        out[name] = d
    return out


def content_bytes(content) -> int:
    """Payload bytes of a message's records (arrays, metrics, configs)."""
    return int(sum(rec.count_bytes() for rec in content.values()))


def arr(a):
    from flwr.app import Array  # noqa: PLC0415

    return Array(np.ascontiguousarray(a, dtype=np.float64))


# ------------------------------------------------------------------ protections
def protection_kind(cfg: dict) -> str:
    return parse_protection(cfg["protection"]).kind


def is_distpab(cfg: dict) -> bool:
    return protection_kind(cfg) == "distpab"


def feature_columns(cfg: dict, columns) -> list:
    drop = {cfg["target"], *(cfg.get("identifiers") or [])}
    return [c for c in columns if c not in drop]


def column_kinds(cfg: dict, df) -> dict:
    forced = {c: "numeric" for c in cfg.get("numeric") or []} | {c: "categorical" for c in cfg.get("categorical") or []}
    out = {}
    for c in feature_columns(cfg, df.columns):
        out[c] = forced.get(c) or ("numeric" if pd.api.types.is_numeric_dtype(df[c].dtype)
                                   and not pd.api.types.is_bool_dtype(df[c].dtype) else "categorical")
    return out


def numeric_columns(cfg: dict, df) -> list:
    return [c for c, k in column_kinds(cfg, df).items() if k == "numeric"]


def category_record(rows, cfg: dict):
    """A silo's category sets (its categorical columns and the target): the first round of SPEC 10."""
    from flwr.app import ConfigRecord  # noqa: PLC0415


    kinds = column_kinds(cfg, rows)
    values = {c: sorted(set(cell_texts(rows[c]).tolist())) for c, k in kinds.items() if k == "categorical"}
    values[cfg["target"]] = sorted(set(rows[cfg["target"]].astype(str).tolist()))
    return ConfigRecord({"kinds": json.dumps(kinds), "values": json.dumps(values)})


# ------------------------------------------------------------------ feature space
def space_to_json(space) -> str:
    return json.dumps({"columns": space.columns, "kinds": space.kinds, "qi": space.quasi_identifiers,
                       "categories": space.categories})


def space_from_json(text: str):
    d = json.loads(text)
    return FeatureSpace(d["columns"], d["kinds"], d["qi"], d["categories"])


def agree_space(cfg: dict, replies: Sequence[dict]):
    """The feature space every silo uses, from the declared vocabulary or the union of the silos' category
    sets (never one silo's rows); and the sorted class labels. ``replies``: ``{"kinds", "values"}`` dicts."""
    declared = cfg.get("categories") or {}
    kinds, values = None, {}
    for r in replies:
        if kinds is None:
            kinds = r["kinds"]
        elif r["kinds"] != kinds:
            raise InputError(f"silos disagree on column kinds: {kinds} vs {r['kinds']}; declare --numeric / "
                             "--categorical")
        for c, vals in r["values"].items():
            values.setdefault(c, set()).update(vals)
    if kinds is None:
        raise InputError("no silo described its columns and no vocabulary was declared")
    for c, vals in declared.items():
        values[c] = set(map(str, vals))
    target = cfg["target"]
    classes = sorted(values.pop(target, set()))
    if cfg.get("classes"):
        classes = list(cfg["classes"])
    if len(classes) < 2:
        raise InputError(f"the silos hold a single value of '{target}'; a classifier needs two or more")
    columns = list(kinds)
    if is_distpab(cfg):
        num = [c for c in columns if kinds[c] == "numeric"]
        return FeatureSpace(num, {c: "numeric" for c in num}, [], {}), classes
    cats = {c: sorted(values.get(c, set())) for c in columns if kinds[c] == "categorical"}
    qi = [q for q in cfg.get("qi") or [] if q in columns]
    return FeatureSpace(columns, kinds, qi, cats), classes


def label_codes(y_text, classes: Sequence[str]) -> np.ndarray:
    codes = pd.Index(list(classes)).get_indexer(np.asarray(y_text, dtype=object).astype(str))
    if (codes < 0).any():
        raise InputError("a silo holds a target value the agreed classes do not list")
    return codes.astype(np.int64)


# ------------------------------------------------------------------ the scaler (chunk / combine / finalize)
def moments_chunk(X: np.ndarray):
    """Per feature: count of present values, mean, sum of squared deviations (NaN = missing)."""
    X = np.asarray(X, dtype=np.float64)
    ok = ~np.isnan(X)
    n = ok.sum(axis=0).astype(np.float64)
    s = np.where(ok, X, 0.0).sum(axis=0)
    mean = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
    dev = np.where(ok, X - mean, 0.0)
    return n, mean, (dev * dev).sum(axis=0)


def moments_combine(chunks):
    n, mean, m2 = (np.array(a, dtype=np.float64) for a in chunks[0])
    for chunk in chunks[1:]:  # Chan et al.'s pairwise update, per feature
        n, mean, m2 = merge_moments(n, mean, m2, *(np.asarray(a, dtype=np.float64) for a in chunk))
    return n, mean, m2


def moments_finalize(chunk):
    n, mean, m2 = chunk
    var = np.divide(m2, n, out=np.zeros_like(m2), where=n > 0)
    std = np.sqrt(var)
    std[std == 0] = 1.0
    return mean, std


def apply_scaler(X: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Missing values take the global mean; then standardized with the global statistics (float32)."""
    X = np.asarray(X, dtype=np.float64)
    X = np.where(np.isnan(X), mean, X)
    return ((X - mean) / std).astype(np.float32)


# ------------------------------------------------------------------ DISTPAB records
def stats_record(st):
    from flwr.app import ArrayRecord  # noqa: PLC0415

    return ArrayRecord({"n": arr([float(st.n)]), "mean": arr(st.mean), "comoment": arr(st.comoment)})


def stats_from_record(rec):
    return Stats(int(rec["n"].numpy()[0]), rec["mean"].numpy().astype(np.float64),
                 rec["comoment"].numpy().astype(np.float64))


def params_record(params):
    from flwr.app import ArrayRecord  # noqa: PLC0415

    return ArrayRecord({"mean": arr(params.mean), "scale": arr(params.scale), "H": arr(params.H)})


def params_from_record(rec, conf):
    return PerturbParams(mean=rec["mean"].numpy(), scale=rec["scale"].numpy(), H=rec["H"].numpy(),
                         noise=float(conf["noise"]))


# ------------------------------------------------------------------ FedAvg
def fedavg(weight_lists: Sequence[Sequence[np.ndarray]], counts: Sequence[float]) -> list[np.ndarray]:
    """``w = sum_k (n_k / n) w_k`` per array, accumulated in float64 in the given order; float32 out."""
    if not weight_lists:
        raise InputError("FedAvg needs at least one client's weights")
    counts = np.asarray(counts, dtype=np.float64)
    if (counts <= 0).any():
        raise InputError("every client must report a positive sample count")
    total = counts.sum()
    out = []
    for j in range(len(weight_lists[0])):
        acc = np.zeros(np.shape(weight_lists[0][j]), dtype=np.float64)
        for w, c in zip(weight_lists, counts):
            acc += np.asarray(w[j], dtype=np.float64) * c
        out.append((acc / total).astype(np.float32))
    return out


def round_seed(seed: int, silo: int, rnd: int) -> int:
    """The seed of a silo's batch order in a round (independent streams per silo and round)."""
    return int(np.random.SeedSequence([int(seed), int(silo), int(rnd)]).generate_state(1, np.uint32)[0])
