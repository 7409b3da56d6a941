"""The DISTPAB privacy-utility frontier (gpuanon.perturb.frontier), the best-of-draws baselines
and `gpuanon attack --frontier` (SPEC section 8, points 8 and 9).

Small data and few folds keep these fast; the evidence runs live in bench/results/.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sklearn")

from expected import run_cli  # noqa: E402

from gpuanon.errors import InputError  # noqa: E402
from gpuanon.perturb.attacks import evaluate_attacks, naive_inference  # noqa: E402
from gpuanon.perturb.baselines import (  # noqa: E402
    draw_seeds,
    geometric_perturbation,
    geometric_perturbation_best,
    random_rotation,
    random_rotation_best,
)
from gpuanon.perturb.frontier import (  # noqa: E402
    COLUMNS,
    ICA_ITER,
    METHODS,
    compare,
    frontier,
    load_frontier_data,
    parse_noise,
    plot_frontier,
)

REQUIRED = ["method", "noise", "accuracy_knn", "accuracy_svm", "accuracy_lr", "naive", "ica", "io",
            "attack_min"]


@pytest.fixture(scope="module")
def wine():
    X, y, _feats, _note = load_frontier_data("wine")
    return X, y


@pytest.fixture(scope="module")
def small_frontier(wine):
    X, y = wine
    return frontier(X, y, noise=(0.1, 0.5), folds=3, draws=3, random_state=4, backend="cpu")


# --------------------------------------------------------------------------- baselines: best of ten


def _direct_best(X, base, seed, draws=10, **kw):
    """Every draw made and attacked one by one, the highest naive-inference minimum kept."""
    outs = [base(X, random_state=np.random.default_rng(s), **kw) for s in draw_seeds(seed, draws)]
    scores = [naive_inference(X, Xp)["min"] for Xp in outs]
    best = int(np.argmax(scores))
    return best, scores, outs[best]


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_rp_keeps_the_best_of_ten_draws(wine, seed):
    X, _ = wine
    Xp, info = random_rotation_best(X, random_state=seed)
    best, scores, Xd = _direct_best(X, random_rotation, seed)
    assert info["draws"] == 10 and len(info["naive_scores"]) == 10
    np.testing.assert_allclose(info["naive_scores"], scores, rtol=1e-9, atol=1e-12)
    assert info["best_draw"] == best
    np.testing.assert_allclose(Xp, Xd, rtol=1e-12, atol=1e-9)
    # the kept draw is at least as hard to read naively as any single draw
    assert naive_inference(X, Xp)["min"] == pytest.approx(max(scores), rel=1e-9)
    assert len(set(np.round(scores, 6))) > 1  # the draws do differ


@pytest.mark.parametrize("seed,noise", [(0, 0.3), (5, 0.05), (9, 0.8)])
def test_gp_keeps_the_best_of_ten_draws(wine, seed, noise):
    X, _ = wine
    Xp, info = geometric_perturbation_best(X, noise=noise, random_state=seed)
    best, scores, Xd = _direct_best(X, geometric_perturbation, seed, noise=noise)
    np.testing.assert_allclose(info["naive_scores"], scores, rtol=1e-9, atol=1e-12)
    assert info["best_draw"] == best
    np.testing.assert_array_equal(Xp, Xd)


def test_best_of_draws_constant_column_and_bad_draws():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=200), np.full(200, 7.0), rng.normal(size=200)])
    for fn in (random_rotation_best, geometric_perturbation_best):
        Xp, info = fn(X, draws=4, random_state=1)
        np.testing.assert_array_equal(Xp[:, 1], X[:, 1])
        assert info["draws"] == 4
        with pytest.raises(ValueError, match="draws"):
            fn(X, draws=0)


# --------------------------------------------------------------------------- the frontier table


def test_frontier_has_the_columns_and_one_row_per_method_and_noise(small_frontier):
    t = small_frontier.table
    assert list(t.columns) == COLUMNS and set(REQUIRED) <= set(t.columns)
    assert len(t) == len(METHODS) * 2
    assert sorted(zip(t["method"], t["noise"])) == sorted((m, n) for m in METHODS for n in (0.1, 0.5))
    assert not t.duplicated(["method", "noise"]).any()
    for col in ("accuracy_knn", "accuracy_svm", "accuracy_lr", "accuracy_mean"):
        assert t[col].between(0, 1).all()
    np.testing.assert_allclose(t["accuracy_mean"], t[["accuracy_knn", "accuracy_svm", "accuracy_lr"]].mean(axis=1))
    np.testing.assert_allclose(t["attack_min"], t[["naive", "ica", "io"]].min(axis=1))
    assert (t["attack_min"] >= 0).all()
    # RP has no noise: one draw repeated on every noise value's row, noise_applied 0
    rp = t[t["method"] == "rp"]
    assert (rp["noise_applied"] == 0).all()
    assert rp[["accuracy_knn", "naive", "ica", "io"]].nunique().eq(1).all()
    # a noiseless rotation falls to the known input-output attack
    assert rp["io"].max() < 1e-6
    assert small_frontier.raw["mean"] > 0.9


def test_frontier_rows_match_a_direct_computation(wine):
    """The GP row at one noise value equals the best-of-draws GP attacked and cross-validated directly."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    from gpuanon.perturb.frontier import make_models

    X, y = wine
    res = frontier(X, y, noise=(0.3,), methods=("gp",), folds=3, draws=4, random_state=2, raw=False)
    row = res.table.iloc[0]
    Xp, info = geometric_perturbation_best(X, noise=0.3, draws=4, random_state=2)
    att = evaluate_attacks(X, Xp, random_state=2, ica_max_iter=ICA_ITER)
    assert row["naive"] == pytest.approx(att["naive_inference"]["min"])
    assert row["io"] == pytest.approx(att["known_io_attack"]["min"])
    assert row["ica"] == pytest.approx(att["ica_reconstruction"]["min"])
    assert row["best_draw"] == info["best_draw"]
    cv = StratifiedKFold(n_splits=3, shuffle=True, random_state=2)
    knn = cross_val_score(make_models(2)["knn"], Xp, y, cv=cv, scoring="accuracy").mean()
    assert row["accuracy_knn"] == pytest.approx(knn)


@pytest.mark.slow
def test_frontier_is_reproducible_with_a_seed(wine, small_frontier):
    X, y = wine
    again = frontier(X, y, noise=(0.1, 0.5), folds=3, draws=3, random_state=4, backend="cpu")
    cols = [c for c in COLUMNS if c != "seconds"]
    pd.testing.assert_frame_equal(again.table[cols], small_frontier.table[cols])
    other = frontier(X, y, noise=(0.1, 0.5), folds=3, draws=3, random_state=5, backend="cpu")
    assert not np.allclose(other.table["naive"], small_frontier.table["naive"])


@pytest.mark.slow
def test_svm_sample_and_noise_effect():
    X, y, _f, _n = load_frontier_data("breast_cancer")
    res = frontier(X, y, noise=(0.05, 0.8), methods=("distpab", "gp"), folds=3, draws=2, svm_max_rows=200,
                   random_state=0, raw=False)
    t = res.table
    assert (t["svm_rows"] == 200).all() and (t["rows"] == 569).all()
    for m in ("distpab", "gp"):
        lo, hi = t[(t.method == m) & (t.noise == 0.05)].iloc[0], t[(t.method == m) & (t.noise == 0.8)].iloc[0]
        assert hi["io"] > lo["io"]  # more noise resists the known input-output attack better


def test_parse_noise_and_bad_inputs(wine):
    assert parse_noise("0.05,0.1,0.2,0.3,0.5,0.8") == (0.05, 0.1, 0.2, 0.3, 0.5, 0.8)
    assert parse_noise([0, 0.5]) == (0.0, 0.5)
    for bad, msg in (("", "empty"), ("0.1,,0.2", "empty entry"), ("0.1,abc", "'abc' is not a number"),
                     ("-0.1", ">= 0"), ("nan", ">= 0"), ("inf", ">= 0"), ("0.1,0.1", "repeats 0.1")):
        with pytest.raises(InputError, match=msg):
            parse_noise(bad)
    X, y = wine
    with pytest.raises(InputError, match="methods"):
        frontier(X, y, methods=("distpab", "pca"), folds=3)
    with pytest.raises(InputError, match="folds"):
        frontier(X, y, folds=1)
    with pytest.raises(InputError, match="unknown dataset"):
        load_frontier_data("iris")


def test_compare_reads_the_measured_points():
    t = pd.DataFrame({
        "method": ["distpab"] * 3 + ["gp"] * 3,
        "noise": [0.1, 0.3, 0.5] * 2,
        "accuracy_mean": [0.95, 0.94, 0.90, 0.94, 0.93, 0.91],
        "attack_min": [0.20, 0.10, 0.30, 0.10, 0.20, 0.40],
    })
    c = compare(t, others=("gp",))["gp"]
    assert c["per_noise"] == {0.1: "dominates", 0.3: "trade-off", 0.5: "dominated"}
    # distpab 0.5 (0.90, 0.30) is dominated by gp 0.5 (0.91, 0.40); distpab 0.3 (0.94, 0.10) only ties
    # gp 0.1 (0.94, 0.10), and a tie is not domination
    assert c["pareto_undominated"] == [0.1, 0.3]
    # distpab 0.1 (0.95, 0.20) dominates gp 0.1 (0.94, 0.10) and gp 0.3 (0.93, 0.20)
    assert c["dominates_points_of_other"] == [0.1, 0.3]


def test_plot_is_a_png(small_frontier, tmp_path):
    p = tmp_path / "f.png"
    plot_frontier(small_frontier.table, p, title="wine", raw_accuracy=small_frontier.raw["mean"])
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [f.name for f in tmp_path.iterdir()] == ["f.png"]  # no temporary file left


# --------------------------------------------------------------------------- CLI


@pytest.mark.slow
def test_cli_frontier_writes_csv_and_png(tmp_path):
    r = run_cli("attack", "--frontier", "--dataset", "wine", "--noise", "0.1,0.3", "--folds", "3", "--draws", "2",
                "--seed", "1", "--out", "fr.csv", "--png", "fr.png", "--report", "fr.json", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    t = pd.read_csv(tmp_path / "fr.csv")
    assert set(REQUIRED) <= set(t.columns) and len(t) == 6
    assert sorted(zip(t["method"], t["noise"])) == sorted((m, n) for m in METHODS for n in (0.1, 0.3))
    assert (tmp_path / "fr.png").read_bytes()[:4] == b"\x89PNG"
    assert "distpab vs gp" in r.stdout
    # the same seed through the API gives the same numbers
    X, y, _f, _n = load_frontier_data("wine")
    api = frontier(X, y, noise=(0.1, 0.3), folds=3, draws=2, random_state=1, raw=False).table
    np.testing.assert_allclose(t["attack_min"], api["attack_min"], rtol=1e-9)
    np.testing.assert_allclose(t["accuracy_svm"], api["accuracy_svm"], rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("args,msg", [
    (["--noise", "0.1,oops"], "--noise value 'oops' is not a number"),
    (["--noise", "0.2,-1"], ">= 0"),
    (["--noise", ""], "--noise is empty"),
    (["--noise", "0.1,0.1"], "repeats"),
    (["--folds", "1"], "--folds"),
    (["--png", "fr.jpg"], "must end with .png"),
    (["--perturbed", "p.csv"], "cannot be used with --frontier"),
])
def test_cli_frontier_errors(tmp_path, args, msg):
    base = ["attack", "--frontier", "--dataset", "wine", "--out", "fr.csv"]
    r = run_cli(*base, *args, cwd=tmp_path, timeout=120)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_cli_frontier_unknown_dataset_and_missing_out(tmp_path):
    r = run_cli("attack", "--frontier", "--dataset", "iris", "--out", "fr.csv", cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "iris" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("attack", "--frontier", "--dataset", "wine", cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "--out" in r.stderr
    r = run_cli("attack", "--frontier", "--out", "fr.csv", cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "--dataset" in r.stderr
    assert list(tmp_path.iterdir()) == []
