"""The silo: a Flower ``ClientApp`` that loads, protects and trains on its own rows where they live.

Messages it answers (every reply is checked by :func:`outbound_guard` before it leaves):

``query.prepare``
    Load the silo's rows (node configuration ``data-path`` or ``partition-id``); protect them
    (none, Mondrian with any protection of the evaluation's grammar, or DISTPAB). Reply: a
    MetricRecord (silo, rows, classes, suppressed, information loss), the category sets of its
    categorical columns and target (when the server has no declared vocabulary), and for DISTPAB
    the phase-1 statistics (row count, mean, co-moment of its numeric features).
``query.encode``
    The agreed feature space (and, for DISTPAB, the phase-2 parameters and this silo's entity
    number): encode the protected rows (DISTPAB: perturb them first). Reply: per-feature count,
    mean and squared deviations (the scaler's chunk), so every silo scales identically.
``train``
    Global weights and the scaler in; E local epochs of SGD in PyTorch (CPU or CUDA); reply: the
    weights and the sample count (``num-examples``) and the last epoch's loss.

The protected rows stay in the node's ``context.state`` (on the node) between messages.
"""

from __future__ import annotations

import json
import pickle

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from . import protocol as P
from ..anonymize.mondrian import Mondrian
from ..errors import InputError
from ..evaluate import mondrian_metrics, parse_protection
from ..models.nn import load_torch, resolve_device
from ..perturb.distpab import entity_seed, local_stats, perturb_entity
from .experiment import silo_rows
from .mapping import silo_mapping
from .models import build_model, get_weights, set_weights, spec_from_dict, train_local

_STATE = "gpuanon-silo"


def outbound_guard(msg: Message, ctx: Context, call_next) -> Message:
    """A Flower mod on the silo: the reply may carry only what the protocol allows (weights, counts,
    statistics); anything else (rows of any kind) is refused before it leaves the node."""
    reply = call_next(msg, ctx)
    if reply.has_content():
        P.check_outbound(msg.metadata.message_type, reply.content)
    return reply


app = ClientApp(mods=[outbound_guard])


def _torch_setup(cfg: dict):
    torch = load_torch()
    threads = int(cfg.get("torch_threads") or 1)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    dev = cfg.get("device") or None
    if dev in (None, "auto"):
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    return torch, resolve_device(dev)


def _save(ctx: Context, **items) -> None:
    rec = ctx.state.get(_STATE)
    old = pickle.loads(rec["blob"]) if rec is not None else {}
    old.update(items)
    ctx.state[_STATE] = ConfigRecord({"blob": pickle.dumps(old)})


def _load(ctx: Context) -> dict:
    rec = ctx.state.get(_STATE)
    if rec is None:
        raise InputError("this silo has not been prepared (no query.prepare message reached it)")
    return pickle.loads(rec["blob"])


def protect(cfg: dict, rows):
    """``(protected frame or None, hierarchies, silo info)`` for the experiment's protection."""
    prot = parse_protection(cfg["protection"])
    info = {"rows_in": int(len(rows)), "rows": int(len(rows)), "classes": None, "suppressed": 0,
            "entropy_loss": None, "ncp": None}
    if prot.kind in ("raw", "distpab"):
        return rows, {}, info
    kw = dict(prot.params)
    k = int(len(rows)) if prot.kind == "suppress" else kw.pop("k")
    m = Mondrian(k=k, quasi_identifiers=cfg["qi"], sensitive=cfg.get("sensitive") or cfg["target"],
                 target=cfg["target"], identifiers=cfg.get("identifiers") or None,
                 numeric=[c for c in cfg.get("numeric") or [] if c in cfg["qi"]],  # the QIs' kinds only
                 categorical=[c for c in cfg.get("categorical") or [] if c in cfg["qi"]],
                 output_format="minmax", backend="cpu", progress=False,
                 max_suppression=kw.pop("max_suppression", cfg.get("max_suppression", 0.01)),
                 hierarchies=kw.pop("hierarchies", None), **kw)
    out = m.fit_transform(rows)
    met = mondrian_metrics(m)
    hmap = {name: b.hierarchy for name, b in m.table_.hierarchies.items()}
    info.update(rows=int(len(out)), classes=met.get("n_classes"), suppressed=int(met.get("n_suppressed") or 0),
                entropy_loss=met.get("entropy_loss"), ncp=met.get("ncp"))
    if cfg.get("test_mapping"):
        info["mapping"] = silo_mapping(out, cfg, hmap)
    return out, hmap, info


@app.query("prepare")
def prepare(msg: Message, ctx: Context) -> Message:
    cfg = json.loads(msg.content["config"]["experiment"])
    silo, rows = silo_rows(cfg, dict(ctx.node_config))
    out, hmap, info = protect(cfg, rows)
    content = RecordDict()
    metrics = {"silo": silo, "rows": info["rows"], "rows-in": info["rows_in"], "suppressed": info["suppressed"]}
    for key in ("classes", "entropy_loss", "ncp"):
        if info[key] is not None:
            metrics[key.replace("_", "-")] = float(info[key])
    content["silo"] = MetricRecord(metrics)
    if not cfg.get("categories"):
        content["categories"] = P.category_record(rows, cfg)
    num_cols = P.numeric_columns(cfg, rows)
    if P.is_distpab(cfg):
        X = rows[num_cols].to_numpy(dtype=np.float64)
        if np.isnan(X).any():
            raise InputError("DISTPAB needs complete numeric features; this silo has missing values")
        content["distpab-stats"] = P.stats_record(local_stats(X))
    if "mapping" in info:
        content["mapping"] = ConfigRecord({"ecs": json.dumps(info.pop("mapping"))})
    _save(ctx, cfg=cfg, silo=silo, rows=out, hmap=hmap)
    return Message(content, reply_to=msg)


@app.query("encode")
def encode(msg: Message, ctx: Context) -> Message:
    st = _load(ctx)
    cfg, rows = st["cfg"], st["rows"]
    space = P.space_from_json(msg.content["space"]["space"])
    classes = json.loads(msg.content["space"]["classes"])
    y_text = rows[cfg["target"]].astype(str).to_numpy()
    if P.is_distpab(cfg):
        params = P.params_from_record(msg.content["distpab-params"], msg.content["space"])
        entity = int(msg.content["space"]["entity"])
        X = rows[space.columns].to_numpy(dtype=np.float64)
        X, perm = perturb_entity(X, params, entity_seed(int(msg.content["space"]["entropy"]), entity), shuffle=True)
        X, y_text = np.asarray(X, dtype=np.float64), y_text[np.asarray(perm)]
    elif P.protection_kind(cfg) in ("mondrian", "suppress"):
        X = space.transform_generalized(rows, st["hmap"])
    else:
        X = space.transform_raw(rows)
    y = P.label_codes(y_text, classes)
    n, mean, m2 = P.moments_chunk(X)
    _save(ctx, X=X.astype(np.float32), y=y, rows=None)
    content = RecordDict({"moments": ArrayRecord({"n": P.arr(n), "mean": P.arr(mean), "m2": P.arr(m2)}),
                          "silo": MetricRecord({"silo": st["silo"], "rows": int(X.shape[0]),
                                                "features": int(X.shape[1])})})
    return Message(content, reply_to=msg)


@app.train()
def train(msg: Message, ctx: Context) -> Message:
    st = _load(ctx)
    cfg = st["cfg"]
    conf = msg.content["config"]
    torch, device = _torch_setup(cfg)
    mean = np.asarray(conf["scale-mean"], dtype=np.float64)
    std = np.asarray(conf["scale-std"], dtype=np.float64)
    X = P.apply_scaler(st["X"], mean, std)
    spec = spec_from_dict(json.loads(conf["model"]))
    weights = msg.content["arrays"].to_numpy_ndarrays()
    net = build_model(spec, X.shape[1], int(conf["n-classes"]), seed=0, device=device)
    set_weights(net, weights)
    Xt = torch.from_numpy(X).to(device)
    yt = torch.from_numpy(st["y"].astype(np.int64)).to(device)
    rnd = int(conf["server-round"])
    loss = train_local(net, spec, Xt, yt, int(conf["local-epochs"]),
                       seed=P.round_seed(int(cfg.get("seed", 0)), st["silo"], rnd))
    content = RecordDict({"arrays": ArrayRecord(get_weights(net)),
                          "metrics": MetricRecord({"num-examples": int(X.shape[0]), "train-loss": float(loss),
                                                   "silo": int(st["silo"])})})
    return Message(content, reply_to=msg)
