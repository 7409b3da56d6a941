"""Re-identification risk (gpuanon.risk) against ARX 3.9.2's numbers on Adult and a hand-worked table."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gpuanon
from gpuanon.errors import InputError
from gpuanon.risk import assess
from gpuanon.risk.population import PREPARED_STARTS, digamma, population_uniqueness, trigamma

ADULT_QI = ["age", "education", "marital-status", "occupation", "race", "gender", "native-country"]


@pytest.fixture(scope="module")
def adult_text():
    """The bundled Adult, every value as read (``?`` a value of its own), as ARX reads the CSV."""
    path = Path(gpuanon.__file__).parent / "data" / "adult.csv.gz"
    return pd.read_csv(path, dtype=str, keep_default_na=False)


# ARX 3.9.2 (commit aacd487f), Adult, all 32,561 rows, the seven QIs above, input data.

def test_adult_sample_measures_match_arx(adult_text):
    r = assess(adult_text, ADULT_QI, threshold=0.2)
    s = r.sample
    assert (s.n, s.n_classes, s.sample_uniques) == (32561, 16455, 11972)
    assert s.sample_uniqueness == pytest.approx(0.367679125334, abs=1e-12)
    assert s.prosecutor.records_at_risk == pytest.approx(0.619053468874, abs=1e-12)
    assert s.prosecutor.average == pytest.approx(0.505359172016, abs=1e-12)
    assert s.prosecutor.lowest == pytest.approx(0.0208333333333, abs=1e-12)
    assert s.prosecutor.highest == 1.0
    r5 = assess(adult_text, ADULT_QI, threshold=0.5)
    assert r5.sample.prosecutor.records_at_risk == pytest.approx(0.367679125334, abs=1e-12)


@pytest.mark.parametrize("kw, pitman, zayatz, frac_p, frac_z", [
    (dict(sampling_fraction=0.01), 247833.4975, 463280.839, 0.0761136, 0.142281),
    (dict(sampling_fraction=0.1), 55005.67069, 62092.37827, 0.168931, 0.190696),
    (dict(population=325610), 55005.67069, 62092.37827, 0.168931, 0.190696),
    (dict(population=317238626), 4946181.549, 42910659.39, None, None),
])
def test_adult_population_uniqueness_matches_arx(adult_text, kw, pitman, zayatz, frac_p, frac_z):
    p = assess(adult_text, ADULT_QI, **kw).population
    assert p.pitman.converged and p.pitman.available
    assert p.pitman.uniques == pytest.approx(pitman, rel=1e-6)
    assert p.zayatz.uniques == pytest.approx(zayatz, rel=1e-6)
    if frac_p is not None:
        assert p.pitman.fraction == pytest.approx(frac_p, rel=1e-5)
        assert p.zayatz.fraction == pytest.approx(frac_z, rel=1e-5)
    assert p.dankar.model == "pitman" and p.dankar.uniques == p.pitman.uniques


def test_solver_configuration_is_arx_default():
    # ARXSolverConfiguration.getDefaultStartValues: d1, d2 in 0, 0.33, 0.66, 0.99
    assert len(PREPARED_STARTS) == 16
    assert PREPARED_STARTS[0] == (0.0, 0.0) and PREPARED_STARTS[5] == (0.33, 0.33)


def test_arx_gamma_functions():
    from scipy import special

    x = np.array([0.5, 3.0, 12.5, 40.0])
    np.testing.assert_allclose(digamma(x), special.digamma(x), rtol=1e-12)
    # ARX's trigamma adds the asymptotic tail only from 12 on: right there, ...
    np.testing.assert_allclose(trigamma(np.array([12.5, 40.0])), special.polygamma(1, [12.5, 40.0]), rtol=1e-12)
    # ... and without the tail below 12 (1/9^2 + ... for 8 <= x < 12: 0 for x = 9)
    assert trigamma(9.0) == 0.0 and trigamma(7.0) == pytest.approx(1 / 49)
    # negative arguments by ARX's reflection formulas; values printed by ARX's Gamma class
    for x, d, t in ((-0.7109823157044616, -2.2352115731152216, 15.219027174140283),
                    (-638.7, 4.177716827929474, 15.077849247553793), (-3.2, 5.635370221172651, 28.427875060386217)):
        assert digamma(x) == pytest.approx(d, rel=1e-13) and trigamma(x) == pytest.approx(t, rel=1e-13)


def test_no_sample_uniques_every_estimate_zero():
    p = population_uniqueness([2, 3], [5, 4], population_size=1000)
    assert p.dankar.model == "none" and p.pitman.uniques == 0.0 and p.zayatz.uniques == 0.0


def test_non_convergence_is_a_reported_state():
    # a histogram of uniques only: SNB finds no root; reported, never raised
    p = population_uniqueness([1], [500], population_size=100000)
    assert p.snb.converged is False and p.snb.available is False and p.snb.uniques is None
    assert p.dankar.available  # the rule falls back


# A hand-worked table: 12 rows, QIs a and z; row 9 has every QI suppressed ('*'): left out.
#   class      rows          f   F (population table / weights)
#   (A, 1)     1,2,3,12      4   10   (weights 2+2+3+3)
#   (B, 1)     4,5           2    4   (2+2)
#   (C, 2)     6             1    2
#   (D, 2)     7             1    1
#   (E, 3)     8             1    5
#   (?, 3)     10            1    2   ('?' is a value of its own)
#   (NaN, 3)   11            1    1   (a missing value is a value of its own)
# n = 11 counted rows, J = 7 classes, 5 sample uniques.
HAND = pd.DataFrame({
    "a": ["A", "A", "A", "B", "B", "C", "D", "E", "*", "?", None, "A"],
    "z": ["1", "1", "1", "1", "1", "2", "2", "3", "*", "3", "3", "1"],
    "w": [2, 2, 3, 2, 2, 2, 1, 5, 7, 2, 1, 3],
})
POP = pd.DataFrame({"a": ["A"] * 10 + ["B"] * 4 + ["C"] * 2 + ["D"] + ["E"] * 5 + ["?"] * 2 + [None] + ["F"] * 3,
                    "z": ["1"] * 14 + ["2"] * 3 + ["3"] * 8 + ["9"] * 3})


def test_hand_worked_prosecutor():
    s = assess(HAND, ["a", "z"], threshold=0.2).sample
    assert (s.n_rows, s.n, s.n_suppressed, s.n_classes, s.sample_uniques) == (12, 11, 1, 7, 5)
    assert s.sample_uniqueness == 5 / 11
    p = s.prosecutor
    assert p.highest == 1.0 and p.lowest == 1 / 4 and p.average == 7 / 11
    assert p.records_at_risk == 11 / 11  # 1/4 = 0.25 > 0.2: every class
    assert assess(HAND, ["a", "z"], threshold=0.3).sample.prosecutor.records_at_risk == 7 / 11  # f <= 2
    assert assess(HAND, ["a", "z"], threshold=0.5).sample.prosecutor.records_at_risk == 5 / 11  # 1/2 not > 0.5
    # without a population: F = f, journalist = prosecutor, marketer = J / n
    assert s.journalist == p and s.marketer == 7 / 11 and s.population_source == "sample"
    assert assess(HAND, ["a", "z"]).individual is None


@pytest.mark.parametrize("how", ["population_table", "weights"])
def test_hand_worked_journalist_and_marketer(how):
    kw = {"population_table": POP} if how == "population_table" else {"weights": "w"}
    s = assess(HAND, ["a", "z"], threshold=0.2, **kw).sample
    assert s.population_source == how
    j = s.journalist
    assert j.highest == 1.0 and j.lowest == 1 / 10
    # 1/F > 0.2 for F in {4, 2, 1, 2, 1}: f = 2 + 1 + 1 + 1 + 1 = 6 rows; (E, 3) has 1/5 = 0.2, not > 0.2
    assert j.records_at_risk == pytest.approx(6 / 11, abs=1e-15)
    # max(J / sum F = 7/25, (1/n) sum f/F = (0.4 + 0.5 + 0.5 + 1 + 0.2 + 0.5 + 1) / 11 = 4.1 / 11)
    assert j.average == pytest.approx(4.1 / 11, abs=1e-15)
    assert s.marketer == pytest.approx(4.1 / 11, abs=1e-15)
    assert s.prosecutor.average == 7 / 11  # the prosecutor reads the sample alone


def test_hand_worked_individual_risk_with_weights():
    r = assess(HAND, ["a", "z"], weights="w", threshold=0.2, per_record=True)
    ln2, ln5 = math.log(2), math.log(5)
    # (A,1) f=4 F=10 p=0.4: p / (f - (1 - p)) = 0.4 / 3.4
    # (B,1) f=2 F=4 p=0.5: p/(1-p) - (p/(1-p))^2 ln(1/p) = 1 - ln 2
    # (C,2), (?,3) f=1 F=2 p=0.5: p/(1-p) ln(1/p) = ln 2
    # (D,2), (NaN,3) f = F = 1: 1/f = 1
    # (E,3) f=1 F=5 p=0.2: 0.25 ln 5
    total = 4 * (0.4 / 3.4) + 2 * (1 - ln2) + 2 * ln2 + 2 * 1.0 + 0.25 * ln5
    ind = r.individual
    assert ind.global_risk == pytest.approx(total, rel=1e-14)
    assert ind.global_risk_share == pytest.approx(total / 11, rel=1e-14)
    assert ind.highest == 1.0
    assert ind.records_above_threshold == 7  # every row but the four of (A, 1) (0.118)
    pr = r.per_record
    assert len(pr) == 12 and np.isnan(pr["individual_risk"][8]) and pr["class"][8] == -1
    assert pr["individual_risk"][0] == pytest.approx(0.4 / 3.4, rel=1e-14)
    assert pr["individual_risk"][3] == pytest.approx(1 - ln2, rel=1e-14)
    assert pr["individual_risk"][7] == pytest.approx(0.25 * ln5, rel=1e-14)
    assert pr["prosecutor_risk"][0] == 0.25 and pr["prosecutor_risk"][5] == 1.0


def test_published_cells_are_values_and_partial_star_is_not_suppressed():
    # an interval, a set, a hierarchy label, a '*' in one QI only: each one value
    df = pd.DataFrame({"age": ["20-30", "20-30", "[-5, 3]", "*", "*"],
                       "job": ["a|b", "a|b", "Professional", "*", "x"]})
    s = assess(df, ["age", "job"]).sample
    assert (s.n, s.n_suppressed, s.n_classes, s.sample_uniques) == (4, 1, 3, 2)


def test_minmax_pair_and_numeric_means():
    df = pd.DataFrame({"age_min": [20, 20, 20, 31], "age_max": [30, 30, 40, 40], "inc": [1.5, 1.5, 1.5, 2.0]})
    s = assess(df, ["age_min", "age_max", "inc"]).sample
    assert s.n_classes == 3 and s.sample_uniques == 2


def test_to_dict_is_strict_json():
    import json

    d = assess(HAND, ["a", "z"], population=100).to_dict()
    json.dumps(d, allow_nan=False)
    assert d["sample"]["n"] == 11 and d["class_size_histogram"] == {"1": 5, "2": 1, "4": 1}


@pytest.mark.parametrize("kw, words", [
    (dict(population=5), "below the 11 rows"),
    (dict(sampling_fraction=0), "outside (0, 1]"),
    (dict(sampling_fraction=1.5), "outside (0, 1]"),
    (dict(population=20, sampling_fraction=0.5), "not both"),
    (dict(weights="a"), "also a quasi-identifier"),
    (dict(weights="nope"), "is not a column"),
    (dict(population_table=POP.drop(columns="z")), "has no column 'z'"),
    (dict(population_table=POP[POP.a != "D"]), "does not contain 1 of the sample's QI combinations"),
    (dict(threshold=2), "outside [0, 1]"),
])
def test_bad_input_one_line_errors(kw, words):
    with pytest.raises(InputError, match=None) as e:
        assess(HAND, ["a", "z"], **kw)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("w", [[-1] + [1] * 11, [None] + [1] * 11, [float("inf")] + [1] * 11])
def test_bad_weights(w):
    with pytest.raises(InputError, match="must be finite numbers >= 0"):
        assess(HAND.assign(w=w), ["a", "z"], weights="w")


@pytest.mark.parametrize("w", [[0.5] * 12, [0] + [1] * 11])
def test_weights_below_the_class_rows_are_refused(w):
    """F_j < f_j (weights summing to less than a class's rows) would give risks above 1 / f_j."""
    with pytest.raises(InputError, match="sums to less than the rows of") as e:
        assess(HAND.assign(w=w), ["a", "z"], weights="w")
    assert "'w'" in str(e.value) and "\n" not in str(e.value)


def test_weights_of_fractions_summing_to_the_rows_pass():
    """Ten rows of weight 0.1 + ... are not refused for a rounding error: weights of exactly 1 give F_j = f_j."""
    r = assess(HAND.assign(w=[0.1 * 10] * 12), ["a", "z"], weights="w")
    assert r.sample.population_source == "weights"


def test_suda_runs_on_the_published_cells():
    """``assess(..., suda=True)`` is SUDA2 on the QIs' codes, '*' and missing cells missing (never in an
    MSU); a ``_min`` / ``_max`` pair is one QI; DIS-SUDA's fraction is n / N with a population."""
    from gpuanon.risk.suda import suda2

    r = assess(HAND, ["a", "z"], suda=True, suda_max_size=2)
    codes = np.array([[0, 0], [0, 0], [0, 0], [1, 0], [1, 0], [2, 1], [3, 1], [4, 2], [-1, -1], [5, 2], [-1, 2],
                      [0, 0]])
    ref = suda2(codes, names=["a", "z"])
    assert r.suda.score.tolist() == ref.score.tolist() and r.suda.contributions == ref.contributions
    assert r.suda.score[8] == 0 and r.suda.sampling_fraction == 0.01
    assert assess(HAND, ["a", "z"], suda=True, population=110).suda.sampling_fraction == 11 / 110
    out = pd.DataFrame({"age_min": [20, 20, 20, 30, 40], "age_max": [29, 29, 39, 39, 49], "z": list("aabbb")})
    s = assess(out, ["age_min", "age_max", "z"], suda=True).suda
    assert s.n_qis == 2 and set(s.contributions) == {"age", "z"}
    assert s.score.tolist() == suda2(np.array([[0, 0], [0, 0], [1, 1], [2, 1], [3, 1]])).score.tolist()


def test_device_path_on_the_double_equals_the_host():
    """The grouping and SUDA2 on the device (CuPy's API on tests/cupy_double.py) give the host's result; the
    double cannot catch cuDF frames' own factorize (frames stay pandas there)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from cupy_double import DeviceDouble

    from gpuanon import backend as B

    host = assess(HAND, ["a", "z"], weights="w", population=1000, per_record=True, suda=True)
    dev = DeviceDouble()
    with B.use_device_module(dev):
        d = assess(HAND, ["a", "z"], weights="w", population=1000, per_record=True, suda=True,
                   backend="gpu")
    assert d.to_dict() == host.to_dict() and d.to_dict()["suda"]["msu_total"] > 0
    pd.testing.assert_frame_equal(d.per_record, host.per_record)
    without = DeviceDouble()
    with B.use_device_module(without):
        assess(HAND, ["a", "z"], weights="w", population=1000, backend="gpu")
    assert dev.stats.summary()["ops"] > 3 * without.stats.summary()["ops"]  # SUDA2 ran on the device too
    mixed = HAND.assign(x=np.arange(12, dtype=np.float32) % 3, y=np.float32(1.5), v=np.arange(12) % 2,
                        s=np.array([0.0, -0.0, np.nan, -np.nan] * 3, dtype=np.float32))  # one 0, one NaN
    with B.use_device_module(dev):
        d2 = assess(mixed, ["a", "x", "y", "v", "s"], backend="gpu")  # float32 bits, ints and text on the device
        d3 = assess(HAND, ["a", "z"], population_table=POP, backend="gpu")
    assert d2.to_dict() == assess(mixed, ["a", "x", "y", "v", "s"]).to_dict()
    assert d3.to_dict() == assess(HAND, ["a", "z"], population_table=POP).to_dict()
    s = dev.stats.summary()
    assert s["syncs_escaped"] == 0 and s["uploads_escaped"] == 0, s["escaped_sites"]


def test_grouping_equals_a_pandas_groupby_on_random_tables():
    """Classes by packed words and a checked hash = pandas' group-by (missing a value), on random
    tables mixing float32 pairs, float64, ints, text with missing values."""
    from gpuanon.risk.classes import group

    rng = np.random.default_rng(0)
    for trial in range(20):
        n = int(rng.integers(1, 400))
        df = pd.DataFrame({
            "f1": rng.integers(0, 3, n).astype(np.float32), "f2": rng.choice([0.0, -0.0, np.nan, 1.5], n).astype(
                np.float32), "f3": rng.integers(0, 2, n).astype(np.float32),
            "d": rng.choice([0.25, np.nan, -0.0, 0.0], n), "i": rng.integers(-2, 2, n),
            "s": rng.choice(["a", "b", None, "?"], n)})
        cols = list(df.columns[: int(rng.integers(1, 7))])
        g = group(df, cols)
        ref = df[cols].astype(object).where(df[cols].notna(), "<NA>").map(
            lambda v: 0.0 if isinstance(v, float) and v == 0 else v)  # -0.0 and 0.0 are one value
        want = ref.groupby(cols, sort=False).ngroup().to_numpy()
        assert g.n_classes == want.max() + 1
        # the same partition of the rows (ids may be numbered differently)
        pairs = set(zip(g.row_class.tolist(), want.tolist()))
        assert len(pairs) == g.n_classes


def test_a_hash_collision_falls_back_to_exact_grouping(monkeypatch):
    """Every row hashed alike: the per-word check finds the classes differ and groups them exactly."""
    from gpuanon.risk import classes

    monkeypatch.setattr(classes, "splitmix64", lambda z, xp: z * xp.uint64(0))
    df = pd.DataFrame({"a": np.array([1, 2, 1, 3], dtype=np.float32), "b": np.array([0, 0, 0, 5], np.float32),
                       "c": [1.0, 1.0, 1.0, 2.0], "d": ["x", "x", "x", "y"]})
    g = classes.group(df, ["a", "b", "c", "d"])
    assert g.n_classes == 3 and sorted(g.sizes.tolist()) == [1, 1, 2]


def test_prosecutor_highest_equals_pycanon_max_rir_on_anonymized_adult():
    """pycanon's max_rir (1 / smallest class, its own group-by) on our anonymized Adult outputs."""
    pycanon_metrics = pytest.importorskip("pycanon.metrics")
    from gpuanon import Mondrian
    from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS, load_adult

    df = load_adult().head(8000)
    qi = list(ADULT_QUASI_IDENTIFIERS)
    for k, fmt in ((3, "range"), (7, "mean")):
        out = Mondrian(k=k, quasi_identifiers=qi, backend="cpu", progress=False, output_format=fmt).fit_transform(df)
        assert assess(out, qi).sample.prosecutor.highest == pycanon_metrics.max_rir(out, qi)


REFERENCE = json.loads((Path(__file__).parent / "arx_population_reference.json").read_text())


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=[c["name"] for c in REFERENCE["cases"]])
def test_population_models_match_arx_runs(case, adult_text):
    """Zayatz, Pitman, SNB and Dankar's choice against ARX's own model classes, run on the same
    class-size histograms (tests/arx_population_reference.json; 0.0 there = not available)."""
    if "histogram" in case:
        sizes = np.array([int(k) for k in case["histogram"]])
        counts = np.array(list(case["histogram"].values()))
    else:
        sizes, counts = np.unique(adult_text.groupby(case["adult_qis"], sort=False).size().to_numpy(),
                                  return_counts=True)
    n = int((sizes * counts).sum())
    for run in case["runs"]:
        N = run["population"] if "population" in run else round(n / run["sampling_fraction"])
        r = population_uniqueness(sizes, counts, population_size=N)
        for model in ("zayatz", "pitman", "snb", "dankar"):
            est = getattr(r, model)
            mine = 0.0 if est.uniques is None else est.uniques
            assert mine == pytest.approx(run[model], rel=1e-6), (case["name"], run, model)
        assert r.dankar.model == run["model"], (case["name"], run)
