"""The optimization step and hierarchies (files and automatic) on a Dask LocalCluster: identical to one
process."""

import pytest

pytest.importorskip("dask")
pytest.importorskip("distributed")

from gpuanon import Mondrian  # noqa: E402
from gpuanon.distributed.mondrian import run_distributed  # noqa: E402
from gpuanon.hierarchy import Hierarchy  # noqa: E402
from test_distributed_mondrian import as_text, check_same, fit_both, shards  # noqa: E402

pytestmark = pytest.mark.slow  # Dask clusters

QI5 = ["age", "education", "marital-status", "gender", "race"]
QI6 = QI5 + ["hours-per-week"]

EDUCATION = {  # leaf: (level 1, level 2); leaves listed out of the data's code order on purpose
    "Doctorate": ("Advanced", "Higher"), "Prof-school": ("Advanced", "Higher"), "Masters": ("Advanced", "Higher"),
    "Bachelors": ("College", "Higher"), "Assoc-acdm": ("College", "Higher"), "Assoc-voc": ("College", "Higher"),
    "Some-college": ("College", "Higher"),
    "HS-grad": ("High school", "School"), "12th": ("High school", "School"), "11th": ("High school", "School"),
    "10th": ("High school", "School"), "9th": ("High school", "School"),
    "7th-8th": ("Primary", "School"), "5th-6th": ("Primary", "School"), "1st-4th": ("Primary", "School"),
    "Preschool": ("Primary", "School"),
}
MARITAL = """Never-married;Never married;*
Married-civ-spouse;Married;*
Married-AF-spouse;Married;*
Married-spouse-absent;Married;*
Divorced;Was married;*
Separated;Was married;*
Widowed;Was married;*
"""


def education_hierarchy(with_missing: bool = False) -> Hierarchy:
    leaves = list(EDUCATION) + (["NaN"] if with_missing else [])
    paths = [[*EDUCATION[v], "*"] for v in EDUCATION] + ([["Unknown", "Unknown", "*"]] if with_missing else [])
    return Hierarchy.from_labels(leaves, paths, name="education")


@pytest.fixture(scope="module")
def marital_csv(tmp_path_factory):
    p = tmp_path_factory.mktemp("h") / "marital.csv"
    p.write_text(MARITAL)
    return str(p)


def check_all(m, df, res):
    """check_same (labels, output, verification, every metric) and the optimization / hierarchy sections."""
    check_same(m, df, res)
    assert res.n_classes == m.report_["n_classes"] and res.n_partitions == m.report_["n_partitions"]
    assert res.optimization == m.optimization_
    # the entropy loss of the partitions before the step: one process's, to the order of sums
    want = m.result_.optimize_loss_before
    assert (res.optimize_loss_before is None) == (want is None)
    if want is not None:
        assert res.optimize_loss_before == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert set(res.hierarchies) == set(m.hierarchies_)
    for col, want in m.hierarchies_.items():
        got = res.hierarchies[col]
        assert set(got) == set(want), col
        for key, v in want.items():
            if isinstance(v, dict):  # the candidates' U' and losses, per rho
                assert set(got[key]) == set(v), (col, key)
                for r, x in v.items():
                    assert got[key][r] == (pytest.approx(x, rel=1e-9, abs=1e-12) if isinstance(x, float) else x)
                continue
            assert got[key] == (pytest.approx(v, rel=1e-9, abs=1e-12) if isinstance(v, float) else v), (col, key)


OPT_CASES = {
    "k": dict(k=5, quasi_identifiers=QI6),
    "t": dict(k=4, t=0.3, sensitive="income", quasi_identifiers=QI5),
    "l": dict(k=4, l=2, sensitive="income", quasi_identifiers=QI6),
    "relaxed": dict(k=4, t=0.2, sensitive="income", mode="relaxed", quasi_identifiers=QI5),
}


@pytest.mark.parametrize("workers,cuts", [(2, [700]), (3, [1900, 2100])])
@pytest.mark.parametrize("case", sorted(OPT_CASES))
def test_optimize_identical(clients, adult, case, workers, cuts):
    m = Mondrian(target="income", optimize=True, backend="cpu", progress=False, **OPT_CASES[case])
    res = run_distributed(m, clients[workers], frames=shards(adult, cuts), local_rows=250)
    assert res.cluster.info["levels"] >= 2
    assert res.optimization["exact_classes"] > 0  # the step changed something
    assert res.optimize_loss_before is not None
    check_all(m, adult, res)


@pytest.mark.parametrize("workers", [2, 3])
def test_optimize_missing_values(clients, adult_missing, workers):
    m = Mondrian(k=5, quasi_identifiers=QI5 + ["hours-per-week"], sensitive="income", l=2, target="income",
                 optimize=True, backend="cpu", progress=False, max_suppression=0.05)
    res = run_distributed(m, clients[workers], frames=shards(adult_missing, [1200, 3900][: workers - 1]),
                          local_rows=400)
    assert res.optimization["exact_classes"] > 0
    check_all(m, adult_missing, res)


@pytest.mark.parametrize("workers,cuts", [(2, [700]), (3, [1900, 2100])])
@pytest.mark.parametrize("fmt", ["range", "minmax"])
def test_user_hierarchies_identical(clients, adult, marital_csv, workers, cuts, fmt):
    m = Mondrian(k=5, quasi_identifiers=QI6, target="income", backend="cpu", progress=False, output_format=fmt,
                 hierarchies={"education": education_hierarchy(), "marital-status": marital_csv})
    res = run_distributed(m, clients[workers], frames=shards(adult, cuts), local_rows=250)
    check_all(m, adult, res)
    out = res.cluster.output
    assert out["education"].isin(["Advanced", "College", "High school", "Primary", "Higher", "School"]).any()
    assert m.metrics_["precision"] is not None and res.metrics["precision"] == pytest.approx(m.metrics_["precision"])
    # the codes follow the hierarchy's leaf order, not the target-based order of a plain column
    edu = [c for c in res.cluster.encoding.columns if c.name == "education"][0]
    assert edu.categories == [v for v in EDUCATION if v in set(adult["education"])]


@pytest.mark.parametrize("workers", [2, 3])
def test_hierarchies_with_optimize_l_and_missing(clients, adult_missing, marital_csv, workers):
    m = Mondrian(k=4, l=2, sensitive="income", quasi_identifiers=QI6, target="income", optimize=True,
                 backend="cpu", progress=False, max_suppression=0.05,
                 hierarchies={"education": education_hierarchy(with_missing=True), "marital-status": marital_csv})
    res = run_distributed(m, clients[workers], frames=shards(adult_missing, [1200, 3900][: workers - 1]),
                          local_rows=300)
    assert res.optimization["exact_classes"] > 0
    check_all(m, adult_missing, res)


def test_hierarchy_with_t_relaxed_optimize(clients, adult, marital_csv):
    m = Mondrian(k=4, t=0.2, sensitive="income", mode="relaxed", quasi_identifiers=QI5, target="income",
                 optimize=True, backend="cpu", progress=False,
                 hierarchies={"education": education_hierarchy(), "marital-status": marital_csv})
    res = run_distributed(m, clients[3], frames=shards(adult, [600, 4100]), local_rows=300)
    check_all(m, adult, res)


def test_estimator_with_cluster_optimize_and_hierarchy(adult, marital_csv):
    m, _, ref, _ = fit_both(adult, k=5, quasi_identifiers=QI6, target="income", backend="cpu", progress=False,
                            optimize=True, hierarchies={"marital-status": marital_csv})
    for key in ("n_rows_out", "n_partitions", "n_classes", "achieved", "class_size", "encoding"):
        assert m.report_[key] == ref.report_[key], key
    # the step's counts and its entropy losses before and after it as one process (to the order of sums)
    counts = ("exact_classes", "exact_rows", "returned_groups", "rounds")
    opt, ref_opt = m.report_["optimization"], ref.report_["optimization"]
    assert {c: opt[c] for c in counts} == {c: ref_opt[c] for c in counts}
    assert ref_opt["entropy_loss_after"] == ref.report_["metrics"]["entropy_loss"]
    assert opt["entropy_loss_after"] == m.report_["metrics"]["entropy_loss"]
    for key in ("entropy_loss_before", "entropy_loss_after"):
        assert ref_opt[key] is not None and opt[key] == pytest.approx(ref_opt[key], rel=1e-9), key
    assert opt["entropy_loss_after"] < opt["entropy_loss_before"]  # the step saved some loss
    assert m.report_["hierarchies"]["marital-status"]["source"] == marital_csv
    assert m.report_["hierarchies"]["marital-status"]["u_after"] == pytest.approx(
        ref.report_["hierarchies"]["marital-status"]["u_after"], rel=1e-9)


AUTO_CASES = {
    "all, rho chosen": dict(k=5, hierarchies="auto"),
    "one column, rho fixed": dict(k=5, hierarchies={"education": "auto"}, rho=25),
    "auto beside a file, l, optimize": dict(k=4, l=2, sensitive="income", optimize=True,
                                            hierarchies={"*": "auto", "marital-status": "CSV"}),
    "relaxed, t, missing": dict(k=4, t=0.3, sensitive="income", mode="relaxed", hierarchies="auto"),
}


@pytest.mark.parametrize("workers,cuts", [(2, [2000]), (3, [300, 3600])])
@pytest.mark.parametrize("case", sorted(AUTO_CASES))
def test_automatic_hierarchies_identical(clients, adult, adult_missing, marital_csv, case, workers, cuts):
    """Frequency tables summed over the shards; rho chosen from the homes' summed mass tables: the
    same rho, candidates' U', labels, output and metrics as one process."""
    kw = dict(AUTO_CASES[case])
    if isinstance(kw["hierarchies"], dict):
        kw["hierarchies"] = {c: (marital_csv if h == "CSV" else h) for c, h in kw["hierarchies"].items()}
    df = adult_missing if "missing" in case else adult
    m = Mondrian(quasi_identifiers=QI6, target="income", backend="cpu", progress=False, **kw)
    res = run_distributed(m, clients[workers], frames=shards(df, cuts), local_rows=300)
    check_all(m, df, res)
    auto = {c: h for c, h in m.hierarchies_.items() if h["source"] == "auto"}
    assert auto and all(res.hierarchies[c]["rho"] == h["rho"] for c, h in auto.items())
    if kw.get("rho") is None:
        assert all(len(h["candidates"]) > 1 for h in auto.values())


def test_hierarchy_errors_are_the_single_process_ones(clients, adult, tmp_path):
    bad = tmp_path / "edu.csv"
    bad.write_text("HS-grad;School;*\nBachelors;Higher;*\n")  # lacks most values of the data
    m = Mondrian(k=5, quasi_identifiers=QI6, target="income", backend="cpu", progress=False,
                 hierarchies={"education": str(bad)})
    with pytest.raises(Exception) as one:
        m.fit(adult)
    with pytest.raises(type(one.value)) as dist:
        run_distributed(m, clients[2], frames=shards(adult, [2000]))
    assert "lacks 14 values of the data" in str(dist.value) and "lacks 14 values" in str(one.value)


@pytest.mark.parametrize("kw", [dict(k=3, mode="relaxed"), dict(k=3, t=0.3, sensitive="income", mode="relaxed"),
                                dict(k=3, l=2, sensitive="income", mode="relaxed", optimize=True)])
def test_classes_split_across_workers_are_one_class(clients, adult, kw):
    """Few distinct tuples and relaxed cuts: partitions finished on different workers publish the same
    cells; they are one output class, verified and measured whole, as in one process."""
    m = Mondrian(quasi_identifiers=["education", "marital-status", "gender", "race"], target="income",
                 backend="cpu", progress=False, **kw)
    res = run_distributed(m, clients[3], frames=shards(adult, [1500, 1600]), local_rows=40)
    assert res.cluster.info["classes_shared_by_workers"] > 0 and res.n_classes < res.n_partitions
    check_all(m, adult, res)


def test_hierarchies_and_optimize_with_numeric_statistics_in_value_ranges(clients, adult, marital_csv, monkeypatch):
    """Every numeric QI's statistics held in value ranges across the workers: still every metric of
    one process, with user hierarchies and the optimization step."""
    from gpuanon.distributed import ranges

    monkeypatch.setattr(ranges, "RANGE_MIN_PAIRS", 0)
    m = Mondrian(k=4, l=2, sensitive="income", quasi_identifiers=QI6, target="income", backend="cpu",
                 progress=False, optimize=True,
                 hierarchies={"education": education_hierarchy(), "marital-status": marital_csv})
    res = run_distributed(m, clients[3], frames=shards(adult, [900, 3300]), local_rows=300)
    assert set(res.cluster.info["column_statistics"]["columns"]) >= {"age", "hours-per-week"}
    assert res.metrics["precision"] is not None
    check_all(m, adult, res)


def test_command_line_optimize_and_hierarchy(adult, marital_csv, tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pandas as pd

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(root))

    def run(*args):
        return subprocess.run([sys.executable, "-m", "gpuanon", *args], capture_output=True, text=True, env=env,
                              timeout=300)

    src = tmp_path / "in"
    src.mkdir()
    for i, part in enumerate(shards(adult, [1800, 1900])):
        part.to_parquet(src / f"part-{i}.parquet", index=False)
    adult.to_parquet(tmp_path / "whole.parquet", index=False)

    def both(args, tag):
        """The cluster's and the one process's command on the same table: the same rows; their reports."""
        out, one = tmp_path / f"{tag}-out", tmp_path / f"{tag}-one.parquet"
        r = run("anonymize", str(src), "--cluster", "local:2", *args, "--out", str(out),
                "--report", str(tmp_path / f"{tag}-r.json"))
        assert r.returncode == 0, r.stderr
        r1 = run("anonymize", str(tmp_path / "whole.parquet"), *args, "--out", str(one),
                 "--report", str(tmp_path / f"{tag}-r1.json"))
        assert r1.returncode == 0, r1.stderr
        got = pd.concat([pd.read_parquet(out / f) for f in sorted(os.listdir(out))], ignore_index=True)
        assert as_text(got) == as_text(pd.read_parquet(one))
        return [json.loads((tmp_path / f"{tag}-{x}.json").read_text()) for x in ("r", "r1")]

    rep, ref = both(["--qi", ",".join(QI6), "--target", "income", "--sensitive", "income", "--l", "2", "--k", "4",
                     "--optimize", "--hierarchy", f"marital-status={marital_csv}"], "files")
    counts = ("exact_classes", "exact_rows", "returned_groups", "rounds")
    assert {c: rep["optimization"][c] for c in counts} == {c: ref["optimization"][c] for c in counts}
    assert rep["optimization"]["exact_classes"] > 0
    assert ref["optimization"]["entropy_loss_after"] == ref["metrics"]["entropy_loss"]
    for key in ("entropy_loss_before", "entropy_loss_after"):  # the cluster's report has both, as one process's
        assert rep["optimization"][key] == pytest.approx(ref["optimization"][key], rel=1e-9), key
    for key in ("n_partitions", "n_classes", "achieved", "class_size"):
        assert rep[key] == ref[key], key
    h, h1 = rep["hierarchies"]["marital-status"], ref["hierarchies"]["marital-status"]
    assert h["source"] == h1["source"] and h["height"] == h1["height"] == 2
    assert h["u_after"] == pytest.approx(h1["u_after"], rel=1e-9)
    rep, ref = both(["--qi", ",".join(QI6), "--target", "income", "--k", "4", "--hierarchies", "auto"], "auto")
    assert {c: h["rho"] for c, h in rep["hierarchies"].items()} == {c: h["rho"] for c, h in ref["hierarchies"].items()}
    assert {c: h["choice"] for c, h in rep["hierarchies"].items()} == {c: h["choice"] for c, h in ref["hierarchies"].items()}
    assert "none" in {h["choice"] for h in ref["hierarchies"].values()}  # no hierarchy won somewhere, in both
