"""The federated grid: one federated run per protection, the centralized baseline, one table."""

from __future__ import annotations

import json
import logging
import time

import numpy as np
import pandas as pd

from . import protocol as P
from ..errors import InputError
from ..evaluate import classification_scores, parse_protection, parse_protections
from ..models.nn import load_torch
from ..perturb.distpab import DISTPAB
from ..report.markdown import markdown_table
from .diagnose import note_one_class
from .experiment import plan
from .models import build_model, loss_value, predict_scores, spec_from_dict, train_local
from . import run

log = logging.getLogger("gpuanon")

SCORES = ("accuracy", "precision", "recall", "f1")

#: The thesis's tables 7.1 and 7.2 (Adult, 3 silos): raw and k-anonymized.
THESIS = {"raw": {"accuracy": 0.850, "precision": 0.727, "recall": 0.616, "f1": 0.667},
          "k=3": {"accuracy": 0.835, "precision": 0.695, "recall": 0.561, "f1": 0.621}}


def centralized(cfg: dict, protections) -> dict:
    """The centralized baseline: the evaluation's protocol (SPEC 9) on the same split, the same model
    trained on the whole training part (protected centrally) for ``rounds x local_epochs`` epochs."""
    from .client_app import protect  # noqa: PLC0415

    torch = load_torch()
    torch.set_num_threads(max(1, int(cfg.get("torch_threads") or 1)))
    p = plan(cfg)
    out = {}
    for prot in protections:
        t0 = time.perf_counter()
        c = dict(cfg, protection=prot)
        rows, hmap, info = protect(c, p.train)
        cats = [{"kinds": P.column_kinds(c, p.train), "values": json.loads(P.category_record(p.train, c)["values"])}]
        space, classes = P.agree_space(c, cats)
        y_tr_text = rows[c["target"]].astype(str).to_numpy()
        y_te_text = p.test[c["target"]].astype(str).to_numpy()
        if P.is_distpab(c):
            prm = parse_protection(prot).params
            dp = DISTPAB(noise=prm.get("noise", 0.3), selection=prm.get("selection", "maximin"),
                         random_state=prm.get("seed", int(c.get("seed", 0))), backend="cpu")
            Xn = rows[space.columns].to_numpy(dtype=np.float64)
            dp.fit(Xn)
            X, perm = dp.perturb(Xn, entity=0)
            y_tr_text = y_tr_text[np.asarray(perm)]
            Xt, perm_t = dp.perturb(p.test[space.columns].to_numpy(dtype=np.float64), entity=1)
            y_te_text = y_te_text[np.asarray(perm_t)]
            X, Xt = np.asarray(X, dtype=np.float64), np.asarray(Xt, dtype=np.float64)
        elif P.protection_kind(c) in ("mondrian", "suppress"):
            X, Xt = space.transform_generalized(rows, hmap), space.transform_raw(p.test)
        else:
            X, Xt = space.transform_raw(rows), space.transform_raw(p.test)
        mean, std = P.moments_finalize(P.moments_chunk(X))
        X, Xt = P.apply_scaler(X, mean, std), P.apply_scaler(Xt, mean, std)
        y, yt = P.label_codes(y_tr_text, classes), P.label_codes(y_te_text, classes)
        spec = spec_from_dict(c["model"])
        net = build_model(spec, X.shape[1], len(classes), seed=int(c.get("seed", 0)))
        Xg, yg = torch.from_numpy(X), torch.from_numpy(y)
        epochs = int(c["rounds"]) * int(c["local_epochs"])
        train_local(net, spec, Xg, yg, epochs, seed=int(c.get("seed", 0)))
        Xtt = torch.from_numpy(Xt)
        S = predict_scores(net, Xtt)
        pos = int(np.argmin(np.bincount(yt, minlength=2))) if len(classes) == 2 else None
        sc = classification_scores(yt, np.argmax(S, axis=1), S, len(classes), pos)
        sc["loss"] = loss_value(net, spec, Xtt, torch.from_numpy(yt))
        out[prot] = {**{k: float(v) for k, v in sc.items()}, "epochs": epochs, "rows": int(len(y)),
                     "classes": info["classes"], "seconds": round(time.perf_counter() - t0, 3)}
        log.info("centralized %s: accuracy %.4f  F1 %.4f (%d epochs, %.1f s)", prot, sc["accuracy"], sc["f1"],
                 epochs, out[prot]["seconds"])
    return out


def compare(cfg: dict, protections, runtime: str = "simulation", gpus_per_client: float = 0.0,
            centralized_baseline: str = "raw") -> dict:
    """Federated runs for every protection of ``'raw;k=3;k=10;k=3,l=2;distpab'`` (same silos, model,
    rounds), the centralized baseline beside them (``'raw'``: the raw training part; ``'all'``: every
    protection applied centrally; ``'none'``); returns ``{"runs", "centralized", "table", "seconds"}``."""
    t0 = time.perf_counter()
    prots = [p.name for p in parse_protections(protections)]
    if centralized_baseline not in ("raw", "all", "none"):  # before any run
        raise InputError(f"centralized baseline '{centralized_baseline}' is not one of raw, all, none")
    runs = {}
    for prot in prots:
        log.info("federated run: protection %s, %d silos (%s)", prot, cfg["silos"], cfg["split"])
        runs[prot] = run.run_federated(dict(cfg, protection=prot), runtime=runtime, gpus_per_client=gpus_per_client,
                                   warn=False)
    cent_prots = {"raw": ["raw"], "all": prots, "none": []}[centralized_baseline]
    t1 = time.perf_counter()
    cent = centralized(cfg, cent_prots) if cent_prots else {}
    cent_s = time.perf_counter() - t1
    raw = runs.get("raw", {}).get("final")
    warnings = []
    for prot in prots:  # a run that learned nothing, with the centralized baseline's F1 beside it
        base = cent.get(prot) or cent.get("raw")
        text = note_one_class(prot, runs[prot], None if base is None else base["f1"])
        warnings += [text] if text else []
    table = []
    for prot in prots:
        f = runs[prot]["final"]
        row = {"protection": prot, **{f"fed_{k}": f[k] for k in SCORES},
               "drop_vs_raw": None if raw is None else raw["accuracy"] - f["accuracy"],
               "seconds": runs[prot]["seconds"]}
        if prot in cent:
            row.update({f"central_{k}": cent[prot][k] for k in SCORES})
        if (prot in THESIS and cfg.get("dataset") == "adult" and not cfg.get("rows") and int(cfg["silos"]) == 3
                and cfg["split"] == "iid" and cfg["model"].get("class_weight", "none") == "none"):  # its loss
            row.update({f"thesis_{k}": THESIS[prot][k] for k in SCORES})
        table.append(row)
    return {"runs": runs, "centralized": cent, "table": table, "protections": prots, "warnings": warnings,
            "seconds": round(time.perf_counter() - t0, 3), "centralized_seconds": round(cent_s, 3)}


def format_table(table: list) -> str:
    """The comparison as a markdown table."""
    if not table:
        raise InputError("nothing to show")
    cols = ["protection"] + [f"fed_{k}" for k in SCORES] + ["drop_vs_raw"]
    if any("central_accuracy" in r for r in table):
        cols += ["central_accuracy", "central_f1"]
    if any("thesis_accuracy" in r for r in table):
        cols += [f"thesis_{k}" for k in SCORES]
    cols.append("seconds")


    def cell(v, c):
        return "" if v is None else (v if isinstance(v, str) else (f"{v:.1f}" if c == "seconds" else f"{v:.3f}"))

    cells = pd.DataFrame([[cell(r.get(c), c) for c in cols] for r in table],
                         columns=[c.replace("_", " ") for c in cols])
    return markdown_table(cells)
