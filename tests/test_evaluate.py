"""Model evaluation: the nine models, the shared feature space, the protocol, the CLI and the page."""

from __future__ import annotations

import base64
import json
import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpuanon
from gpuanon.errors import InputError, SchemaError
from gpuanon.evaluate import (MODEL_NAMES, FeatureSpace, classification_scores, make_model, parse_models,
                              parse_protection, parse_protections, predict_scores, rank_correlations,
                              run_evaluation, score_table)
from gpuanon.hierarchy import Hierarchy

from expected import CHROMIUM, chromium_screenshot, layout_problems, run_cli



# ---------------------------------------------------------------- data
def _qi_table(n=1200, seed=0):
    """A table whose target depends on the QIs only (plus one useless numeric column)."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, n)
    job = rng.choice(["a", "b", "c", "d"], n)
    city = rng.choice(["x", "y", "z"], n)
    noise = rng.normal(size=n)
    score = (age - 48) / 10 + np.where(job == "a", 2.0, 0) + np.where(job == "d", -2.0, 0) + np.where(city == "x", 1, 0)
    y = np.where(score + rng.normal(scale=0.3, size=n) > 0, "yes", "no")
    return pd.DataFrame({"age": age, "job": job, "city": city, "noise": noise, "y": y})


def _xy(n=600, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    w = rng.normal(size=(5, n_classes))
    y = np.argmax(X @ w + 0.1 * rng.normal(size=(n, n_classes)), axis=1)
    return X, y


# ---------------------------------------------------------------- models
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("mlp", "gb") else n
                                  for n in MODEL_NAMES])  # the MLP's and gradient boosting's training: slow
@pytest.mark.parametrize("n_classes", [2, 3])
def test_every_model_trains_and_predicts_on_cpu(name, n_classes):
    X, y = _xy(600, n_classes)
    est, lib = make_model(name, "cpu", random_state=0)
    assert lib in ("sklearn", "xgboost", "torch")
    if name == "mlp":
        assert lib == "torch"
    if name == "gb":
        assert lib == "xgboost"  # xgboost-cpu is in the test extra
    est.fit(X[:450], y[:450])
    pred, S = predict_scores(est, X[450:], n_classes)
    assert pred.shape == (150,) and S.shape == (150, n_classes)
    assert set(np.unique(pred)) <= set(range(n_classes))
    acc = float((pred == y[450:]).mean())
    assert acc > 1.0 / n_classes + 0.2, (name, acc)  # learns a linear rule well above chance
    sc = classification_scores(y[450:], pred, S, n_classes, positive=1 if n_classes == 2 else None)
    assert sc["accuracy"] == pytest.approx(acc)
    assert 0.5 < sc["roc_auc"] <= 1.0


def test_make_model_is_seeded():
    X, y = _xy(400)
    a = make_model("rf", "cpu", random_state=3)[0].fit(X, y).predict_proba(X)
    b = make_model("rf", "cpu", random_state=3)[0].fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)


def test_unknown_model_is_named():
    with pytest.raises(InputError, match="'tree'.*rf, et, gb"):
        parse_models("rf,tree")
    assert parse_models("all") == list(MODEL_NAMES)
    with pytest.raises(InputError, match="twice"):
        parse_models("rf,rf")


def test_scores_match_scikit_learn_multiclass_and_decision_functions():
    from sklearn import metrics as skm
    from sklearn.linear_model import SGDClassifier

    X, y = _xy(900, 3, seed=4)
    m = SGDClassifier(random_state=0).fit(X[:600], y[:600])
    pred, S = predict_scores(m, X[600:], 3)
    np.testing.assert_array_equal(pred, m.predict(X[600:]))
    s = classification_scores(y[600:], pred, S, 3, None)
    assert s["f1"] == pytest.approx(skm.f1_score(y[600:], pred, average="macro"))
    assert s["f1_weighted"] == pytest.approx(skm.f1_score(y[600:], pred, average="weighted"))
    assert s["balanced_accuracy"] == pytest.approx(skm.balanced_accuracy_score(y[600:], pred))
    # binary decision function: the AUC of the raw decision values, oriented to the positive class
    Xb, yb = _xy(600, 2, seed=5)
    mb = SGDClassifier(random_state=0).fit(Xb[:400], yb[:400])
    pb, Sb = predict_scores(mb, Xb[400:], 2)
    np.testing.assert_array_equal(pb, mb.predict(Xb[400:]))
    d = mb.decision_function(Xb[400:])
    assert classification_scores(yb[400:], pb, Sb, 2, 1)["roc_auc"] == pytest.approx(skm.roc_auc_score(yb[400:], d))
    assert classification_scores(yb[400:], pb, Sb, 2, 0)["roc_auc"] == pytest.approx(skm.roc_auc_score(yb[400:] == 0, -d))


def test_binary_scores_are_of_the_positive_class():
    y = np.array([0, 0, 0, 1, 1, 1])
    p = np.array([0, 0, 1, 1, 1, 0])
    S = np.eye(2)[p].astype(float)
    s1 = classification_scores(y, p, S, 2, positive=1)
    s0 = classification_scores(y, p, S, 2, positive=0)
    assert s1["precision"] == pytest.approx(2 / 3) and s1["recall"] == pytest.approx(2 / 3)
    # the thesis's F1 of an all-majority model: macro over classes
    allmaj = classification_scores(np.array([0] * 76 + [1] * 24), np.zeros(100, int), np.tile([1.0, 0.0], (100, 1)), 2, 1)
    assert allmaj["f1"] == 0.0 and allmaj["f1_macro"] == pytest.approx(0.432, abs=1e-3)
    assert allmaj["balanced_accuracy"] == 0.5 and allmaj["roc_auc"] == 0.5
    assert s0["f1"] == pytest.approx(2 / 3)


# ---------------------------------------------------------------- feature space
def test_raw_row_equals_the_row_generalized_to_itself():
    df = _qi_table(300)
    fs = FeatureSpace.from_frame(df, ["age", "job", "city"], exclude=["y"])
    raw = fs.transform_raw(df)
    # every QI generalized to itself: minmax pairs and single values
    gen = pd.DataFrame({"age_min": df["age"], "age_max": df["age"], "job": df["job"], "city": df["city"],
                        "noise": df["noise"], "y": df["y"]})
    np.testing.assert_array_equal(fs.transform_generalized(gen), raw)
    # the same with 'lo-hi' range text holding a single number
    gen2 = gen.drop(columns=["age_min", "age_max"]).assign(age=df["age"].astype(str))
    np.testing.assert_array_equal(fs.transform_generalized(gen2), raw)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-50, 50), st.sampled_from(["p", "q|r", "s\\t", "NaN?", "u"])),
                min_size=1, max_size=40))
def test_raw_equals_self_generalization_property(rows):
    df = pd.DataFrame(rows, columns=["n", "c"])
    fs = FeatureSpace.from_frame(df, ["n", "c"])
    gen = pd.DataFrame({"n_min": df["n"], "n_max": df["n"], "c": df["c"]})
    np.testing.assert_array_equal(fs.transform_generalized(gen), fs.transform_raw(df))
    # one-hot rows: exactly one 1 per categorical block
    X = fs.transform_raw(df)
    assert np.all(X[:, 2:].sum(axis=1) == 1)


def test_sets_hierarchy_labels_and_star_are_weighted_multi_hot():
    raw = pd.DataFrame({"c": ["a", "b", "c|d", "e", None]})
    fs = FeatureSpace.from_frame(raw, ["c"])
    cats = fs.categories["c"]
    assert cats == sorted(["a", "b", "c|d", "e", "NaN"])
    gen = pd.DataFrame({"c": ["a|b", "c\\|d|e", "c|d", "*", "a|NaN"]})
    W = fs.transform_generalized(gen)
    col = {c: i for i, c in enumerate(cats)}
    assert W[0, col["a"]] == W[0, col["b"]] == 0.5 and W[0].sum() == 1
    assert W[1, col["c|d"]] == W[1, col["e"]] == 0.5  # escaped separator inside a value
    assert W[2, col["c|d"]] == 1.0  # a value equal to a category is that category
    np.testing.assert_allclose(W[3], np.full(5, 0.2))  # '*': the whole domain
    assert W[4, col["a"]] == W[4, col["NaN"]] == 0.5
    h = Hierarchy.from_labels(["a", "b", "c|d", "e"], [["AB", "*"], ["AB", "*"], ["CE", "*"], ["CE", "*"]])
    Wh = fs.transform_generalized(pd.DataFrame({"c": ["AB", "CE", "a"]}), {"c": h})
    assert Wh[0, col["a"]] == Wh[0, col["b"]] == 0.5
    assert Wh[1, col["c|d"]] == Wh[1, col["e"]] == 0.5
    assert Wh[2, col["a"]] == 1.0
    with pytest.raises(SchemaError, match="'zz' in generalized column 'c'"):
        fs.transform_generalized(pd.DataFrame({"c": ["a|zz"]}))


def test_unknown_test_categories_encode_as_zeros_and_missing_columns_are_named():
    fs = FeatureSpace.from_frame(pd.DataFrame({"c": ["a", "b"], "n": [1.0, 2.0]}), ["c"])
    X = fs.transform_raw(pd.DataFrame({"c": ["zz"], "n": [3.0]}))
    assert X.tolist() == [[0.0, 0.0, 3.0]]
    with pytest.raises(SchemaError, match="'n'"):
        fs.transform_raw(pd.DataFrame({"c": ["a"]}))


def test_generalized_mondrian_output_has_the_raw_feature_space():
    df = _qi_table(500)
    m = gpuanon.Mondrian(k=5, quasi_identifiers=["age", "job", "city"], sensitive="y", target="y",
                         output_format="minmax", backend="cpu", progress=False)
    out = m.fit_transform(df)
    fs = FeatureSpace.from_frame(df, ["age", "job", "city"], exclude=["y"])
    G, R = fs.transform_generalized(out), fs.transform_raw(df.loc[m.labels_ >= 0])
    assert G.shape == R.shape
    # intervals contain the raw value; multi-hot blocks sum to 1 and cover the raw category
    assert np.all(G[:, 0] <= R[:, 0]) and np.all(R[:, 1] <= G[:, 1])
    for block in (slice(2, 6), slice(6, 9)):
        np.testing.assert_allclose(G[:, block].sum(axis=1), 1.0)
        assert np.all(G[:, block][R[:, block] == 1] > 0)


# ---------------------------------------------------------------- protections
def test_protection_texts():
    assert parse_protection("raw").kind == "raw"
    p = parse_protection("k=3, l=2")
    assert (p.name, p.kind, p.params) == ("k=3,l=2", "mondrian", {"k": 3, "l": 2})
    assert parse_protection("k=3,optimize").params == {"k": 3, "optimize": True}
    assert parse_protection("k=5,hierarchies=auto,rho=10").params == {"k": 5, "hierarchies": "auto", "rho": 10}
    assert parse_protection("distpab,noise=0.5").params == {"noise": 0.5}
    assert parse_protection({"k": 4, "t": 0.3}).name == "k=4,t=0.3"
    assert parse_protection({"kind": "distpab", "noise": 0.1}).name == "distpab,noise=0.1"
    assert [p.name for p in parse_protections("raw;k=3;k=3,t=0.2")] == ["raw", "k=3", "k=3,t=0.2"]
    for bad, msg in (("k=x", "not a whole number; write e.g. k=10"), ("z=3", "unknown option 'z'"), ("l=2", "has no k"),
                     ("distpab,k=3", "unknown DISTPAB option 'k'"), ("raw,k=2", "takes no options"),
                     ("raw;raw", "given twice"), ("", "no protections")):
        with pytest.raises(InputError, match=msg):
            parse_protections(bad)


# ---------------------------------------------------------------- the protocol
@pytest.fixture(scope="module")
def qi_eval():
    df = _qi_table(1500)
    return run_evaluation(df, "raw;k=5;k=40;suppress", ["rf", "lr", "knn"], quasi_identifiers=["age", "job", "city"],
                          target="y", backend="cpu", random_state=1)


def test_useless_protection_gives_a_measurable_drop(qi_eval):
    r = qi_eval.results.set_index(["protection", "model"])
    for mdl in ("rf", "lr", "knn"):
        raw, sup = r.loc[("raw", mdl), "accuracy"], r.loc[("suppress", mdl), "accuracy"]
        assert raw > 0.85, (mdl, raw)
        # every QI is the whole domain: only the noise column is left, so the model is near the base rate
        assert raw - sup > 0.2, (mdl, raw, sup)
        assert r.loc[("suppress", mdl), "accuracy_drop"] == pytest.approx(raw - sup)
        assert r.loc[("raw", mdl), "accuracy_drop"] == 0.0
    assert r.loc[("suppress", "rf"), "n_classes"] == 1
    assert r.loc[("suppress", "rf"), "ncp"] == pytest.approx(1.0)


def test_protocol_split_and_metrics(qi_eval):
    res, cfg = qi_eval.results, qi_eval.config
    assert cfg["n_train"] + cfg["n_test"] == 1500 and cfg["n_test"] == 450
    assert len(res) == 4 * 3 and list(res["protection"].unique()) == ["raw", "k=5", "k=40", "suppress"]
    raw = res[res["protection"] == "raw"].iloc[0]
    assert raw["entropy_loss"] == pytest.approx(0.0, abs=1e-12) and raw["ncp"] == 0.0
    assert (res["n_test"] == 450).all()
    # information loss grows with k; the drop is measured against the same model's raw accuracy
    ncp = res.groupby("protection", sort=False)["ncp"].first()
    assert ncp["raw"] < ncp["k=5"] < ncp["k=40"] < ncp["suppress"]
    for info in qi_eval.protections:
        if info["kind"] == "mondrian":
            assert info["achieved"]["k"] >= info["params"]["k"]
    assert qi_eval.libraries == {"rf": "sklearn", "lr": "sklearn", "knn": "sklearn"}
    # the mean drop follows NCP here (raw and k=5 are close, so not necessarily exactly)
    assert qi_eval.correlations["ncp"]["mean"] > 0.8


def test_test_rows_are_raw_and_held_out():
    df = _qi_table(400)
    df["row"] = np.arange(400)
    ev = run_evaluation(df, "raw", ["nb"], quasi_identifiers=["age", "job", "city"], target="y", identifiers=["row"],
                        backend="cpu", test_size=0.25, random_state=3)
    assert ev.config["n_test"] == 100 and "row" not in ev.config["features"]
    from sklearn.model_selection import train_test_split

    _, te = train_test_split(np.arange(400), test_size=0.25, stratify=pd.factorize(df["y"], sort=True)[0],
                             random_state=3)
    assert ev.results["n_test"].iloc[0] == len(te)


def test_distpab_protection_trains_on_perturbed_numeric_features():
    from sklearn.datasets import load_breast_cancer

    bc = load_breast_cancer(as_frame=True).frame
    ev = run_evaluation(bc, "raw;distpab", ["lr"], target="target", backend="cpu")
    r = ev.results.set_index("protection")
    assert r.loc["distpab", "n_features"] == 30 and np.isnan(r.loc["distpab", "ncp"])
    assert r.loc["distpab", "accuracy"] > 0.9  # the perturbation keeps the geometry
    assert ev.protections[1]["distpab"]["noise"] == 0.3


def test_a_protection_of_a_new_kind_runs_without_touching_the_protocol():
    """The protocol asks a protection only to validate and apply: a kind it has never heard of (here one
    that drops the numeric column and keeps every other feature raw) runs beside raw, its validate
    runs before any protection is applied, and its report entry carries what apply returned."""
    from gpuanon.evaluate import Protected, Protection

    calls = []

    class DropNoise(Protection):
        def validate(self, train, setup):
            calls.append(("validate", len(train)))

        def apply(self, train, test, setup):
            calls.append(("apply", len(train), len(test)))
            X = setup.space.transform_raw(train.assign(noise=0.0))
            return Protected(X, setup.y_train, setup.x_test_raw, setup.y_test, {"ncp": 0.5}, {"dropped": ["noise"]})

    df = _qi_table(400)
    ev = run_evaluation(df, ["raw", DropNoise("drop-noise", "drop")], ["nb"], quasi_identifiers=["age", "job", "city"],
                        target="y", backend="cpu", random_state=2)
    assert calls == [("validate", 280), ("apply", 280, 120)]
    r = ev.results.set_index("protection")
    assert r.loc["drop-noise", "kind"] == "drop" and r.loc["drop-noise", "ncp"] == 0.5
    assert r.loc["drop-noise", "n_train"] == 280 and r.loc["drop-noise", "n_features"] == r.loc["raw", "n_features"]
    assert ev.protections[1]["dropped"] == ["noise"]
    with pytest.raises(InputError, match="unknown kind 'drop'"):
        parse_protection(Protection("drop-noise", "drop"))


def test_rank_correlations_by_hand():
    res = pd.DataFrame({"protection": ["raw", "a", "b", "c"] * 2, "model": ["m"] * 4 + ["n"] * 4,
                        "accuracy_drop": [0, .1, .2, .3, 0, .3, .2, .1], "ncp": [0, .2, .4, .6] * 2,
                        "entropy_loss": [0, 1, 1, 1] * 2, "gionis_tassa": np.nan, "dm": 1, "cm": 0, "c_avg": None})
    c = rank_correlations(res)
    # n: ranks (1, 2, 3, 4) vs (1, 4, 3, 2): 1 - 6 * 8 / (4 * 15)
    assert c["ncp"]["m"] == pytest.approx(1.0) and c["ncp"]["n"] == pytest.approx(0.2)
    # mean drops 0, .2, .2, .2 -> tied ranks (1, 3, 3, 3): Pearson of ranks = 3 / sqrt(5 * 3)
    assert c["ncp"]["mean"] == pytest.approx(3 / np.sqrt(15))
    assert c["gionis_tassa"]["m"] is None and c["dm"]["m"] is None


def test_bad_inputs_are_named():
    df = _qi_table(200)
    with pytest.raises(SchemaError, match="target column 'nope'"):
        run_evaluation(df, "raw", ["lr"], quasi_identifiers=["age"], target="nope")
    with pytest.raises(InputError, match="no target"):
        run_evaluation(df, "raw", ["lr"], quasi_identifiers=["age"])
    with pytest.raises(InputError, match="no quasi-identifiers"):
        run_evaluation(df, "k=3", ["lr"], target="y")
    with pytest.raises(InputError, match="test_size"):
        run_evaluation(df, "raw", ["lr"], quasi_identifiers=["age"], target="y", test_size=1.5)
    one = df.copy()
    one.loc[0, "y"] = "rare"
    with pytest.raises(SchemaError, match="'rare' occurs once"):
        run_evaluation(one, "raw", ["lr"], quasi_identifiers=["age"], target="y")


def test_python_entry_point_returns_a_frame():
    df = _qi_table(300)
    res = gpuanon.evaluate(df, protections=["raw", {"k": 5}], models=["nb"], quasi_identifiers=["age", "job"],
                           target="y", backend="cpu")
    assert isinstance(res, pd.DataFrame) and list(res["protection"]) == ["raw", "k=5"]
    for c in ("protection", "model", "accuracy", "precision", "recall", "f1", "balanced_accuracy", "roc_auc",
              "train_seconds", "entropy_loss", "ncp", "dm", "cm", "gionis_tassa"):
        assert c in res.columns, c
    # gpuanon.evaluate is both the module and, called, the function
    assert gpuanon.evaluate.run_evaluation is run_evaluation and callable(gpuanon.evaluate)
    t = score_table(res)
    assert t.shape == (1, 4) and t.index.tolist() == ["GaussianNB"]


def test_evaluate_package_layout():
    """One job per module, every public name at gpuanon.evaluate, the house rules kept."""
    import gpuanon.evaluate as ev
    from gpuanon.evaluate import experiment, features, models, protections, tables

    assert layout_problems("gpuanon.evaluate") == []
    for mod in (experiment, features, models, protections, tables):
        for name in getattr(mod, "__all__", [n for n in vars(mod) if not n.startswith("_")]):
            if name in ev.__all__:
                assert getattr(ev, name) is getattr(mod, name), name
    assert ev.FeatureSpace is features.FeatureSpace and ev.make_model is models.make_model
    assert ev.parse_protection is protections.parse_protection and ev.markdown_scores is tables.markdown_scores


# ---------------------------------------------------------------- CLI and page
@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("evaluate")
    r = run_cli("evaluate", "--dataset", "adult", "--rows", "3000", "--protections", "raw;k=10;k=3,l=2",
             "--models", "lr,nb,gb", "--out", "res.csv", "--html", "res.html", cwd=d)
    return r, d


@pytest.mark.slow
def test_cli_evaluate_writes_csv_json_html(cli_run):
    r, tmp_path = cli_run
    assert r.returncode == 0, r.stderr
    res = pd.read_csv(tmp_path / "res.csv")
    assert len(res) == 9 and set(res["model"]) == {"lr", "nb", "gb"}
    doc = json.loads((tmp_path / "res.json").read_text())
    assert doc["config"]["target"] == "income" and doc["config"]["positive"] == ">50K"
    assert set(doc["rank_correlations"]) >= {"ncp", "entropy_loss", "dm", "cm"}
    html = (tmp_path / "res.html").read_text()
    imgs = [s for s in html.split("src='")[1:] if s.startswith("data:image/png;base64,")]
    assert len(imgs) == 2
    for s in imgs:
        assert base64.b64decode(s.split(",", 1)[1].split("'", 1)[0])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Which information-loss metric predicted the accuracy drop?" in html
    assert "Gradient Boosting" in html and "Balanced accuracy and ROC AUC" in html
    assert "| Gradient Boosting |" in r.stdout  # the markdown table


@pytest.mark.slow
def test_cli_evaluate_bad_model_writes_nothing(tmp_path):
    r = run_cli("evaluate", "--dataset", "adult", "--models", "rf,boost", "--out", "res.csv", cwd=tmp_path)
    assert r.returncode == 2 and "unknown model(s) 'boost'" in r.stderr
    assert not (tmp_path / "res.csv").exists() and not (tmp_path / "res.json").exists()
    r = run_cli("evaluate", "--dataset", "adult", "--protections", "k=3,q=1", "--out", "res.csv", cwd=tmp_path)
    assert r.returncode == 2 and "unknown option 'q'" in r.stderr


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} not installed")
def test_evaluation_page_renders_in_chromium(cli_run, tmp_path):
    import io

    import matplotlib.image as mpimg

    r, d = cli_run
    assert r.returncode == 0, r.stderr
    shot = tmp_path / "shot.png"
    p = chromium_screenshot(d / "res.html", shot, tmp_path, size="1200,3000")
    assert shot.exists(), p.stderr[-2000:]
    pixels = mpimg.imread(io.BytesIO(shot.read_bytes()), format="png")
    assert pixels.shape[0] >= 2500 and pixels.std() > 0


def test_gpu_backend_factory_falls_back_and_says_so(caplog):
    """Without cuML / CUDA torch the GPU backend's factory picks scikit-learn and the CPU MLP, and logs why."""
    import logging

    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    lg = logging.getLogger("gpuanon")
    lg.addHandler(caplog.handler)  # also when the CLI's setup has stopped propagation
    with caplog.at_level(logging.INFO, logger="gpuanon"):
        est, lib = make_model("et", "gpu")
        assert lib == "sklearn" and "cuML has no extra-trees classifier" in caplog.text
        est, lib = make_model("mlp", "gpu")
        assert lib == "torch" and est.device == "cpu" and "sees no CUDA device" in caplog.text
        est, lib = make_model("gb", "gpu")
        assert lib == "xgboost" and est.get_params()["device"] == "cuda"
    lg.removeHandler(caplog.handler)
