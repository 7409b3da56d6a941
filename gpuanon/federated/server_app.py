"""The server side: a Flower ``ServerApp`` that agrees the feature space, runs DISTPAB's central step
when asked, then R rounds of FedAvg weighted by the silos' sample counts, scoring the global model
every round on the raw held-out test rows it holds (never a silo's rows).

The steps, as Flower messages (see :mod:`.client_app` for the silo's side):

1. ``query.prepare`` -> each silo protects its rows; back come its counts and information loss, its
   category sets (unless the vocabulary is declared) and, for DISTPAB, its phase-1 statistics.
2. The server agrees the feature space (SPEC 10); for DISTPAB it merges the statistics, searches the
   rotation and reflection and draws the translation (:meth:`gpuanon.perturb.DISTPAB.fit_stats`).
3. ``query.encode`` -> the feature space (and DISTPAB's phase-2 parameters) down; each silo encodes
   (perturbs) its rows and sends back per-feature moments, merged into one scaler.
4. :class:`SiloFedAvg` (Flower's ``FedAvg``) for R rounds of ``train`` messages; after each round the
   global model is scored on the test rows (``evaluate_fn``).
"""

from __future__ import annotations

import json
import logging
import time

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from . import protocol as P
from ..errors import InputError
from ..evaluate import classification_scores, parse_protection
from ..output.io import write_json
from ..models.nn import load_torch
from ..perturb.distpab import DISTPAB
from .experiment import test_rows
from .mapping import mapped_scores
from .models import build_model, get_weights, loss_value, predict_scores, set_weights, spec_from_dict

log = logging.getLogger("gpuanon")

ROUND_SCORES = ("accuracy", "precision", "recall", "f1", "f1_macro", "balanced_accuracy", "roc_auc", "loss")


class SiloFedAvg(FedAvg):
    """Flower's FedAvg over every silo each round, with the average taken exactly (float64, in silo
    order, so a seeded run gives the same weights whatever order the replies arrive in) and the
    bytes of every message counted per silo and round."""

    def __init__(self, n_silos: int, node_silo: dict, wire: list | None = None):
        super().__init__(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=n_silos,
                         min_available_nodes=n_silos)
        self.node_silo = dict(node_silo)
        self.wire = wire if wire is not None else []
        self.bytes_rounds: list[dict] = []
        self._down: dict = {}

    def configure_train(self, server_round, arrays, config, grid):
        msgs = list(super().configure_train(server_round, arrays, config, grid))
        self._down = {self.node_silo[m.metadata.dst_node_id]: P.content_bytes(m.content) for m in msgs}
        return msgs

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        bad = [m for m in replies if m.has_error()]
        if bad:
            raise RuntimeError(f"round {server_round}: silo(s) failed: "
                               + "; ".join(str(m.error.reason)[:500] for m in bad))
        if len(replies) != len(self.node_silo):
            raise RuntimeError(f"round {server_round}: {len(replies)} of {len(self.node_silo)} silos replied")
        replies.sort(key=lambda m: int(m.content["metrics"]["silo"]))
        for m in replies:  # what crossed, as received here; checked again on this side
            P.check_outbound("train", m.content)
            self.wire.append({"type": "train", "round": int(server_round), "silo": int(m.content["metrics"]["silo"]),
                              "records": P.describe(m.content)})
        up = {int(m.content["metrics"]["silo"]): P.content_bytes(m.content) for m in replies}
        self.bytes_rounds.append({"round": int(server_round), "down": int(sum(self._down.values())),
                                  "up": int(sum(up.values())),
                                  "per_silo": [{"silo": s, "down": int(self._down.get(s, 0)), "up": int(up[s])}
                                               for s in sorted(up)]})
        counts = [float(m.content["metrics"]["num-examples"]) for m in replies]
        weights = [m.content["arrays"].to_numpy_ndarrays() for m in replies]
        avg = P.fedavg(weights, counts)
        loss = float(np.dot(counts, [float(m.content["metrics"]["train-loss"]) for m in replies]) / sum(counts))
        return ArrayRecord(avg), MetricRecord({"train-loss": loss, "num-examples": int(sum(counts))})


def _ask(grid: Grid, nodes: list, message_type: str, content_for, timeout: float, wire: list) -> list:
    msgs = [Message(content_for(nid), message_type=message_type, dst_node_id=nid) for nid in nodes]
    down = {nid: P.content_bytes(m.content) for nid, m in zip(nodes, msgs)}
    replies = list(grid.send_and_receive(msgs, timeout=timeout))
    bad = [m for m in replies if m.has_error()]
    if bad:
        raise RuntimeError(f"{message_type}: silo(s) failed: " + "; ".join(str(m.error.reason)[:800] for m in bad))
    if len(replies) != len(nodes):
        raise RuntimeError(f"{message_type}: {len(replies)} of {len(nodes)} silos replied within {timeout:.0f} s")
    for m in sorted(replies, key=lambda r: r.metadata.src_node_id):
        P.check_outbound(message_type, m.content)
        wire.append({"type": message_type, "silo": int(m.content["silo"]["silo"]), "records": P.describe(m.content)})
    return [(m, down[m.metadata.src_node_id], P.content_bytes(m.content)) for m in replies]


def _wait_for_nodes(grid: Grid, n: int, timeout: float) -> list:
    t0 = time.monotonic()
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= n:
            return nodes[:n] if len(nodes) == n else nodes
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"{len(nodes)} of {n} silos connected within {timeout:.0f} s")
        time.sleep(0.5)


def serve(grid: Grid, context: Context, cfg: dict) -> dict:
    """The whole experiment on the server side; returns (and writes to ``cfg['result_path']``) the report."""
    t0 = time.perf_counter()
    n = int(cfg["silos"])
    timeout = float(cfg.get("timeout_s", 3600))
    nodes = _wait_for_nodes(grid, n, float(cfg.get("wait_nodes_s", 120)))
    if len(nodes) != n:
        raise RuntimeError(f"{len(nodes)} nodes are connected, the experiment has {n} silos")
    wire: list = []
    t1 = time.perf_counter()
    node_silo, silos, stats, space, classes = _prepare(grid, nodes, cfg, timeout, wire)
    prepare_s = time.perf_counter() - t1
    dp = _distpab_central(cfg, stats, space)
    mean, std = _encode(grid, nodes, node_silo, silos, space, classes, dp, timeout, wire)
    test, X_test, y_test, pos = _test_set(cfg, space, classes, dp, mean, std)
    t2 = time.perf_counter()
    net, spec, rounds, strategy = _train(grid, cfg, node_silo, space, classes, X_test, y_test, pos, mean, std,
                                         timeout, wire)
    train_s = time.perf_counter() - t2
    mapping = None
    if cfg.get("test_mapping"):
        maps = [silos[s].pop("_mapping", []) for s in range(n)]
        mapping = mapped_scores(net, spec, space, test, maps, mean, std, y_test, classes, pos, cfg)
    for s in silos.values():
        s.pop("_mapping", None)
    doc = _result(cfg, classes, pos, space, y_test, net, rounds, [silos[s] for s in range(n)], strategy, wire, dp)
    doc["seconds"] = round(time.perf_counter() - t0, 3)
    doc["stage_seconds"] = {"prepare": round(prepare_s, 3), "train": round(train_s, 3)}
    if dp is not None:
        doc["distpab"] = {k: v for k, v in dp.report().items()
                          if k in ("phi", "angle_degrees", "axis_feature", "noise", "features", "bytes_per_entity")}
    if mapping is not None:
        doc["test_mapping"] = mapping
    if cfg.get("result_path"):
        write_json(doc, cfg["result_path"])
    return doc


def _prepare(grid: Grid, nodes: list, cfg: dict, timeout: float, wire: list) -> tuple:
    """Step 1, ``query.prepare``: each silo protects its rows; back come its counts, category sets and
    DISTPAB's phase-1 statistics; the server agrees the feature space."""
    n = len(nodes)
    client_cfg = {k: v for k, v in cfg.items() if k not in ("result_path", "test_path")}
    prep = _ask(grid, nodes, "query.prepare",
                lambda nid: RecordDict({"config": ConfigRecord({"experiment": json.dumps(client_cfg)})}), timeout, wire)
    node_silo, silos, cats, stats = {}, {}, [], {}
    for m, down, up in prep:
        rec = m.content["silo"]
        s = int(rec["silo"])
        node_silo[m.metadata.src_node_id] = s
        silos[s] = {"silo": s, "rows_in": int(rec["rows-in"]), "rows": int(rec["rows"]),
                    "classes": None if "classes" not in rec else int(rec["classes"]),
                    "suppressed": int(rec["suppressed"]),
                    "entropy_loss": rec.get("entropy-loss"), "ncp": rec.get("ncp"),
                    "bytes_prepare_down": down, "bytes_prepare_up": up}
        if "categories" in m.content:
            c = m.content["categories"]
            cats.append({"kinds": json.loads(c["kinds"]), "values": json.loads(c["values"])})
        if "distpab-stats" in m.content:
            stats[s] = P.stats_from_record(m.content["distpab-stats"])
            silos[s]["bytes_distpab_up"] = P.content_bytes(RecordDict({"s": m.content["distpab-stats"]}))
        if "mapping" in m.content:
            silos[s]["_mapping"] = json.loads(m.content["mapping"]["ecs"])
    if sorted(silos) != list(range(n)):
        raise RuntimeError(f"silos answered as {sorted(silos)}; expected 0..{n - 1} (check each node's silo / "
                           "partition-id)")
    if not cats and cfg.get("categories"):
        cats = [{"kinds": cfg["kinds"], "values": {}}] if cfg.get("kinds") else []
    space, classes = P.agree_space(cfg, cats)
    return node_silo, silos, stats, space, classes


def _distpab_central(cfg: dict, stats: dict, space):
    """Step 2, DISTPAB's central step (``None`` for other protections): merge the silos' statistics,
    search the rotation and reflection, draw the translation."""
    if not P.is_distpab(cfg):
        return None

    prm = parse_protection(cfg["protection"]).params
    dp = DISTPAB(noise=prm.get("noise", 0.3), selection=prm.get("selection", "maximin"),
                 random_state=prm.get("seed", int(cfg.get("seed", 0))), backend="cpu")
    dp.fit_stats([stats[s] for s in range(int(cfg["silos"]))], feature_names=space.columns)
    return dp


def _encode(grid: Grid, nodes: list, node_silo: dict, silos: dict, space, classes, dp, timeout: float,
            wire: list) -> tuple:
    """Step 3, ``query.encode``: the feature space (and DISTPAB's phase-2 parameters) down, each silo's
    per-feature moments up, merged into one scaler ``(mean, std)``."""
    space_json = P.space_to_json(space)

    def encode_content(nid):
        conf = {"space": space_json, "classes": json.dumps(classes), "entity": node_silo[nid]}
        rd = RecordDict()
        if dp is not None:
            conf.update(entropy=int(dp.seed_entropy()), noise=float(dp.noise))
            rd["distpab-params"] = P.params_record(dp.params_)
        rd["space"] = ConfigRecord(conf)
        return rd

    enc = _ask(grid, nodes, "query.encode", encode_content, timeout, wire)
    chunks = {}
    for m, down, up in enc:
        s = node_silo[m.metadata.src_node_id]
        mo = m.content["moments"]
        chunks[s] = (mo["n"].numpy(), mo["mean"].numpy(), mo["m2"].numpy())
        silos[s].update(bytes_encode_down=down, bytes_encode_up=up, rows_encoded=int(m.content["silo"]["rows"]))
        if dp is not None:
            silos[s]["bytes_distpab_down"] = P.content_bytes(RecordDict({"p": P.params_record(dp.params_)}))
    return P.moments_finalize(P.moments_combine([chunks[s] for s in range(len(nodes))]))


def _test_set(cfg: dict, space, classes, dp, mean, std) -> tuple:
    """The raw held-out rows, on this side only: ``(test frame, scaled features, label codes, positive class)``."""
    test = test_rows(cfg)
    y_text = test[cfg["target"]].astype(str).to_numpy()
    if dp is not None:
        Xt, perm = dp.perturb(test[space.columns].to_numpy(dtype=np.float64), entity=int(cfg["silos"]))
        Xt, y_text = np.asarray(Xt, dtype=np.float64), y_text[np.asarray(perm)]
    else:
        Xt = space.transform_raw(test)
    y_test = P.label_codes(y_text, classes)
    X_test = P.apply_scaler(Xt, mean, std)
    pos = cfg.get("positive")
    if pos is not None and str(pos) in classes:
        pos = classes.index(str(pos))
    elif len(classes) == 2:
        pos = int(np.argmin(np.bincount(y_test, minlength=2)))
    else:
        pos = None
    return test, X_test, y_test, pos


def _train(grid: Grid, cfg: dict, node_silo: dict, space, classes, X_test, y_test, pos, mean, std,
           timeout: float, wire: list) -> tuple:
    """Step 4, the FedAvg rounds, the global model scored on the test rows after each:
    ``(net, spec, round rows, strategy)``."""
    torch = load_torch()
    spec = spec_from_dict(cfg["model"])
    net = build_model(spec, space.n_features, len(classes), seed=int(cfg.get("seed", 0)), device="cpu")
    Xt_t = torch.from_numpy(X_test)
    yt_t = torch.from_numpy(y_test)
    rounds: list[dict] = []

    def evaluate_fn(rnd: int, arrays: ArrayRecord) -> MetricRecord:
        set_weights(net, arrays.to_numpy_ndarrays())
        S = predict_scores(net, Xt_t)
        pred = np.argmax(S, axis=1)
        sc = classification_scores(y_test, pred, S, len(classes), pos)
        sc["loss"] = loss_value(net, spec, Xt_t, yt_t)
        row = {"round": int(rnd), **{k: float(sc[k]) for k in ROUND_SCORES},
               "predicted_classes": int(np.count_nonzero(np.bincount(pred, minlength=len(classes))))}
        rounds.append(row)
        log.info("round %d: accuracy %.4f  F1 %.4f  loss %.4f", rnd, row["accuracy"], row["f1"], row["loss"])
        return MetricRecord({k: v for k, v in row.items() if np.isfinite(v)})

    strategy = SiloFedAvg(int(cfg["silos"]), node_silo, wire)
    train_config = ConfigRecord({"scale-mean": [float(v) for v in mean], "scale-std": [float(v) for v in std],
                                 "model": json.dumps(spec.to_dict()), "n-classes": len(classes),
                                 "local-epochs": int(cfg["local_epochs"])})
    strategy.start(grid, ArrayRecord(get_weights(net)), num_rounds=int(cfg["rounds"]), timeout=timeout,
                   train_config=train_config, evaluate_fn=evaluate_fn)
    return net, spec, rounds, strategy


def _result(cfg: dict, classes, pos, space, y_test, net, rounds: list, silo_list: list, strategy, wire: list,
            dp) -> dict:
    """The experiment's report, less its timings, DISTPAB's parameters and the test mapping."""
    initial = rounds[0] if rounds and rounds[0]["round"] == 0 else None
    per_round = [r for r in rounds if r["round"] > 0]
    n_params = int(sum(w.size for w in get_weights(net)))
    return {
        "config": {k: v for k, v in cfg.items() if k not in ("result_path",)},
        "classes": classes, "positive": None if pos is None else classes[pos],
        "feature_space": {"n_features": space.n_features, "columns": space.columns},
        "n_test": int(len(y_test)), "n_parameters": n_params,
        "initial": initial, "rounds": per_round, "final": per_round[-1] if per_round else initial,
        "silos": silo_list,
        "bytes": {"per_round": strategy.bytes_rounds,
                  "setup_per_silo": [{"silo": s["silo"],
                                      "down": s["bytes_prepare_down"] + s["bytes_encode_down"],
                                      "up": s["bytes_prepare_up"] + s["bytes_encode_up"],
                                      **({"distpab_up": s["bytes_distpab_up"], "distpab_down": s["bytes_distpab_down"]}
                                         if dp is not None else {})} for s in silo_list]},
        "wire": wire,
    }


def make_server_app(cfg: dict | None = None) -> ServerApp:
    """A ServerApp for ``cfg``; without one it reads the JSON text of run-config key ``experiment``
    (the deployment runtime: ``flwr run --run-config "experiment='...'"``)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        c = cfg
        if c is None:
            text = context.run_config.get("experiment")
            if not text:
                raise InputError("the run configuration has no 'experiment' (the JSON of the experiment)")
            c = json.loads(str(text))
        serve(grid, context, c)

    return app


app = make_server_app()
