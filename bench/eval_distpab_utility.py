"""Utility and attack resistance of DISTPAB against raw data, random rotation and geometric perturbation.

The protocol of seed 002 (sections 5.4 and 5.7): each data set is perturbed whole; classifiers
are trained AND tested on the perturbed data with 10-fold stratified cross-validation (features
standardized inside a Pipeline, so the scaler sees only training folds); the three reconstruction
attacks of :mod:`gpuanon.perturb.attacks` are run on the perturbed data paired row by row with
the original.

    python bench/eval_distpab_utility.py                          # 5 seeds, about a minute on 2 cores
    python bench/eval_distpab_utility.py --out bench/results/eval_distpab_cpu.json --markdown t.md
    python bench/eval_distpab_utility.py --quick                  # seed 0, small sets only

Data sets: scikit-learn's breast cancer (569 x 30) and wine (178 x 13, 3 classes), and the six
numeric columns of the bundled Adult table (age, fnlwgt, education-num, capital-gain,
capital-loss, hours-per-week; label income), subsampled to ``--adult-rows`` (default 5,000,
stratified on income, fixed seed 0, the same rows for every seed) so the RBF SVM stays quick.

Methods: raw (no perturbation), DISTPAB (noise 0.3, one entity, default angles and maximin
selection, its own shuffle; labels follow their rows through the returned permutation), random
rotation (RP, Haar) and geometric perturbation (GP, Haar rotation + U(0,1) translation +
N(0, 0.3^2) noise). Models: k-NN (k = 5), SVM (RBF, C = 1, gamma "scale"), logistic regression.
For each seed s, the perturbations use ``random_state = s``, the CV splitter
``StratifiedKFold(10, shuffle=True, random_state=s)`` and the attacks ``random_state = s``.

Checks (the issue's evidence), on the means over seeds and counted per seed:

* utility: DISTPAB's accuracy is within 3 points of raw for each data set and model;
* attacks: DISTPAB's minimum attack score (over the three attacks) is at least that of RP and of
  GP, per data set (seed 002, figure 9).

stdout carries exactly one JSON document; progress and the markdown table go to stderr (and to
``--markdown FILE`` when given). A missed check does not change the exit status.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

ADULT_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
METHODS = ("raw", "distpab", "rp", "gp")
MODELS = ("knn", "svm", "lr")
ATTACK_KEYS = ("naive_inference", "ica_reconstruction", "known_io_attack")
ATTACK_SHORT = {"naive_inference": "NI", "ica_reconstruction": "ICA", "known_io_attack": "IO"}
MAX_DROP = 0.03


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_datasets(adult_rows: int, quick: bool) -> dict:
    from sklearn.datasets import load_breast_cancer, load_wine
    from sklearn.model_selection import train_test_split

    out = {}
    bc = load_breast_cancer()
    out["breast_cancer"] = {"X": bc.data.astype(np.float64), "y": bc.target, "note": "569 x 30"}
    wine = load_wine()
    out["wine"] = {"X": wine.data.astype(np.float64), "y": wine.target, "note": "178 x 13, 3 classes"}
    if not quick:
        from gpuanon.datasets import load_adult

        df = load_adult()
        X = df[ADULT_NUMERIC].to_numpy(dtype=np.float64)
        y = (df["income"] == ">50K").to_numpy().astype(np.int64)
        note = f"{len(df)} rows, 6 numeric columns"
        if adult_rows and adult_rows < len(df):
            X, _, y, _ = train_test_split(X, y, train_size=adult_rows, stratify=y, random_state=0)
            note = f"stratified subsample of {adult_rows} of {len(df)} rows (seed 0), 6 numeric columns"
        out["adult_numeric"] = {"X": X, "y": y, "note": note}
    return out


def make_models() -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    return {
        "knn": make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=5)),
        "svm": make_pipeline(StandardScaler(), SVC(kernel="rbf")),
        "lr": make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)),
    }


def perturb(method: str, X: np.ndarray, y: np.ndarray, seed: int, noise: float, backend: str):
    """Return (Xp for utility, y for utility, Xp paired row by row with X, extra info)."""
    from gpuanon.perturb.attacks import pair_rows
    from gpuanon.perturb.baselines import geometric_perturbation, random_rotation

    if method == "raw":
        return X, y, X, {}
    if method == "rp":
        Xp = random_rotation(X, random_state=seed)
        return Xp, y, Xp, {}
    if method == "gp":
        Xp = geometric_perturbation(X, noise=noise, random_state=seed)
        return Xp, y, Xp, {}
    if method == "distpab":
        from gpuanon.perturb.distpab import DISTPAB

        d = DISTPAB(noise=noise, random_state=seed, backend=backend)
        Xp, perm = d.fit_perturb(X)
        Xp = np.asarray(Xp, dtype=np.float64)
        perm = np.asarray(perm)
        info = {
            "phi": float(d.phi_),
            "angle_degrees": float(d.angle_degrees_),
            "axis": int(d.axis_),
        }
        return Xp, y[perm], pair_rows(Xp, perm), info
    raise ValueError(method)


def evaluate(X, y, seed: int, n_jobs: int) -> dict:
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    cv = StratifiedKFold(n_splits=10, shuffle=True, random_state=seed)
    out = {}
    for name, model in make_models().items():
        s = cross_val_score(model, X, y, cv=cv, scoring="accuracy", n_jobs=n_jobs)
        out[name] = {"mean": float(s.mean()), "std": float(s.std())}
    return out


def _git_head() -> str | None:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001 - informational only
        return None


def _file_sha256(path: str) -> str | None:
    import hashlib

    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def fmt(v: float, digits: int = 3) -> str:
    return f"{v:.{digits}f}"


def summarize(runs: list, datasets: list, seeds: list) -> tuple[dict, list]:
    """Means over seeds per (dataset, method), and the issue's checks."""
    summary: dict = {}
    for ds in datasets:
        summary[ds] = {}
        for meth in METHODS:
            rs = [r for r in runs if r["dataset"] == ds and r["method"] == meth]
            if not rs:
                continue
            acc = {m: float(np.mean([r["accuracy"][m]["mean"] for r in rs])) for m in MODELS}
            att = {a: float(np.mean([r["attacks"][a]["min"] for r in rs])) for a in ATTACK_KEYS}
            summary[ds][meth] = {
                "accuracy": acc,
                "attack_min": att,
                "overall_min": float(np.mean([r["attacks"]["min"] for r in rs])),
                "overall_min_per_seed": [r["attacks"]["min"] for r in rs],
            }
    checks = []
    for ds in datasets:
        S = summary[ds]
        if "raw" in S and "distpab" in S:
            for m in MODELS:
                per_seed = []
                for s in seeds:
                    raw = [r for r in runs if r["dataset"] == ds and r["method"] == "raw" and r["seed"] == s]
                    dp = [r for r in runs if r["dataset"] == ds and r["method"] == "distpab" and r["seed"] == s]
                    if raw and dp:
                        per_seed.append(raw[0]["accuracy"][m]["mean"] - dp[0]["accuracy"][m]["mean"])
                drop = S["raw"]["accuracy"][m] - S["distpab"]["accuracy"][m]
                checks.append({
                    "name": f"{ds}/{m}/distpab_within_3_points_of_raw",
                    "measured": drop,
                    "threshold": MAX_DROP,
                    "pass": bool(drop <= MAX_DROP),
                    "per_seed_drop": per_seed,
                    "seeds_passing": int(sum(d <= MAX_DROP for d in per_seed)),
                })
        for base in ("rp", "gp"):
            if "distpab" not in S or base not in S:
                continue
            dp_seeds = S["distpab"]["overall_min_per_seed"]
            b_seeds = S[base]["overall_min_per_seed"]
            checks.append({
                "name": f"{ds}/distpab_min_attack_score_ge_{base}",
                "measured": {"distpab": S["distpab"]["overall_min"], base: S[base]["overall_min"]},
                "pass": bool(S["distpab"]["overall_min"] >= S[base]["overall_min"]),
                "seeds_passing": int(sum(a >= b for a, b in zip(dp_seeds, b_seeds))),
                "per_attack": {
                    a: {
                        "distpab": S["distpab"]["attack_min"][a],
                        base: S[base]["attack_min"][a],
                        "ge": bool(S["distpab"]["attack_min"][a] >= S[base]["attack_min"][a]),
                    }
                    for a in ATTACK_KEYS
                },
            })
    return summary, checks


def markdown(summary: dict, checks: list, seeds: list) -> str:
    import pandas as pd  # noqa: PLC0415

    from gpuanon.report.markdown import markdown_table  # noqa: PLC0415

    by_name = {c["name"]: c for c in checks}
    note = (f"Means over seeds {seeds}. Accuracy: 10-fold stratified CV, trained and tested on the "
            "(perturbed) data. Attacks: min over attributes of std(z - zhat) (higher resists better); "
            "'min' is over the three attacks. DISTPAB cells: (change vs raw, points). Flags: `DROP` = mean "
            "more than 3 points below raw; `[k/N seeds >3 pts]` = seeds whose drop exceeds 3 points; "
            "`<RP` / `<GP` = DISTPAB's min attack score below that baseline's.")
    rows = []
    for ds, S in summary.items():
        for meth in METHODS:
            if meth not in S:
                continue
            row = S[meth]
            cells = []
            for m in MODELS:
                c = fmt(row["accuracy"][m])
                chk = by_name.get(f"{ds}/{m}/distpab_within_3_points_of_raw")
                if meth == "distpab" and chk is not None:
                    c += f" ({-chk['measured'] * 100:+.1f})"
                    if not chk["pass"]:
                        c += " **DROP**"
                    n_bad = len(chk["per_seed_drop"]) - chk["seeds_passing"]
                    if n_bad:
                        c += f" [{n_bad}/{len(chk['per_seed_drop'])} seeds >3 pts]"
                cells.append(c)
            att = [fmt(row["attack_min"][a]) for a in ATTACK_KEYS]
            mn = fmt(row["overall_min"])
            if meth == "distpab":
                for base, tag in (("rp", "<RP"), ("gp", "<GP")):
                    chk = by_name.get(f"{ds}/distpab_min_attack_score_ge_{base}")
                    if chk is not None and not chk["pass"]:
                        mn += f" **{tag}**"
            rows.append([ds, meth, *cells, *att, mn])
    results = pd.DataFrame(rows, columns=["dataset", "method", "k-NN", "SVM", "LR", "NI min", "ICA min", "IO min",
                                          "min"])
    passes = pd.DataFrame([[c["name"], "yes" if c["pass"] else "**NO**", f"{c['seeds_passing']}/{len(seeds)}"]
                           for c in checks], columns=["check", "pass (means)", "seeds passing"])
    return "\n".join([note, "", markdown_table(results, compact=True), markdown_table(passes, compact=True)[:-1]])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds (default 0,1,2,3,4)")
    ap.add_argument("--adult-rows", type=int, default=5000, help="Adult subsample (0: all rows)")
    ap.add_argument("--noise", type=float, default=0.3, help="DISTPAB and GP noise (default 0.3)")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu", "auto"],
                    help="DISTPAB backend (default cpu)")
    ap.add_argument("--n-jobs", type=int, default=1, help="cross-validation jobs (default 1)")
    ap.add_argument("--quick", action="store_true", help="seed 0, breast cancer and wine only")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--markdown", help="also write the markdown table here")
    a = ap.parse_args(argv)

    import sklearn

    import gpuanon
    from gpuanon.perturb.attacks import evaluate_attacks

    distpab_path = os.path.join(REPO, "gpuanon", "perturb", "distpab.py")
    distpab_sha_start = _file_sha256(distpab_path)
    seeds = [0] if a.quick else [int(s) for s in a.seeds.split(",") if s.strip()]
    data = load_datasets(a.adult_rows, a.quick)
    runs, errors = [], []
    t_all = time.perf_counter()
    for ds, d in data.items():
        X, y = d["X"], d["y"]
        for seed in seeds:
            for meth in METHODS:
                t0 = time.perf_counter()
                try:
                    Xu, yu, Xpair, info = perturb(meth, X, y, seed, a.noise, a.backend)
                    t1 = time.perf_counter()
                    acc = evaluate(Xu, yu, seed, a.n_jobs)
                    t2 = time.perf_counter()
                    att = evaluate_attacks(X, Xpair, random_state=seed)
                    t3 = time.perf_counter()
                except Exception as exc:  # noqa: BLE001 - recorded, run continues
                    errors.append({"dataset": ds, "method": meth, "seed": seed,
                                   "error": f"{type(exc).__name__}: {exc}"})
                    log(f"ERROR {ds} {meth} seed {seed}: {exc!r}")
                    continue
                runs.append({
                    "dataset": ds, "method": meth, "seed": seed, "rows": int(X.shape[0]),
                    "columns": int(X.shape[1]), "perturbation": info, "accuracy": acc,
                    "attacks": {
                        **{k: {kk: att[k][kk] for kk in
                               ("min", "mean", "per_attribute", "constant_attributes")}
                           for k in ATTACK_KEYS},
                        "ica_converged": att["ica_reconstruction"]["converged"],
                        "known_rows": att["known_io_attack"]["known_rows"],
                        "min": att["min"], "weakest": att["weakest"],
                    },
                    "seconds": {"perturb": t1 - t0, "cv": t2 - t1, "attacks": t3 - t2},
                })
                log(f"{ds:14s} {meth:8s} seed {seed}: "
                    + " ".join(f"{m}={acc[m]['mean']:.3f}" for m in MODELS)
                    + " | " + " ".join(f"{ATTACK_SHORT[k]}={att[k]['min']:.3f}" for k in ATTACK_KEYS)
                    + f" min={att['min']:.3f} ({t3 - t0:.1f}s)")

    summary, checks = summarize(runs, list(data), seeds)
    md = markdown(summary, checks, seeds)
    doc = {
        "environment": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "sklearn": sklearn.__version__,
            "gpuanon_path": os.path.dirname(gpuanon.__file__),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "distpab_backend": a.backend,
            "git_head": _git_head(),
            "distpab_py_sha256": distpab_sha_start,
            "distpab_py_changed_during_run": _file_sha256(distpab_path) != distpab_sha_start,
        },
        "config": {
            "seeds": seeds, "noise": a.noise, "cv": "StratifiedKFold(10, shuffle=True, random_state=seed)",
            "models": {"knn": "StandardScaler + KNeighborsClassifier(5)",
                       "svm": "StandardScaler + SVC(rbf, C=1, gamma='scale')",
                       "lr": "StandardScaler + LogisticRegression(max_iter=5000)"},
            "attacks": "gpuanon.perturb.attacks.evaluate_attacks(X, Xp_paired, random_state=seed); "
                       "IO known fraction 0.1; ICA fit on <= 100k rows, <= 2000 iterations",
            "datasets": {ds: d["note"] for ds, d in data.items()},
            "max_accuracy_drop": MAX_DROP,
        },
        "runs": runs,
        "summary": summary,
        "checks": checks,
        "errors": errors,
        "seconds_total": time.perf_counter() - t_all,
        "markdown": md,
    }
    text = json.dumps(doc, indent=1)
    print(text)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as fh:
            fh.write(text + "\n")
    if a.markdown:
        with open(a.markdown, "w") as fh:
            fh.write(md + "\n")
    log("")
    log(md)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
