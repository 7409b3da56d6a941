"""Whole-table statistics of large numeric QIs held in value ranges across workers: every metric of
a cluster run equals one process's, entropy coefficients and Gionis-Tassa included."""


import numpy as np
import pytest

pytest.importorskip("dask")
pytest.importorskip("distributed")

from gpuanon import Mondrian  # noqa: E402
from gpuanon.datasets import make_hepmass  # noqa: E402
from gpuanon.distributed import ranges  # noqa: E402
from gpuanon.distributed.mondrian import run_distributed  # noqa: E402
from gpuanon.metrics.entropy import interval_joint, numeric_domain  # noqa: E402
from test_distributed_mondrian import ADULT_QI, check_same, shards  # noqa: E402

pytestmark = pytest.mark.slow  # Dask clusters

HEP_QI = [f"f{i}" for i in range(28)]


@pytest.fixture
def every_numeric_in_ranges(monkeypatch):
    """Every numeric QI takes the range path, however few its values."""
    monkeypatch.setattr(ranges, "RANGE_MIN_PAIRS", 0)
    monkeypatch.setattr(ranges, "COLUMNS_PER_ROUND", 3)


@pytest.mark.parametrize("workers,cuts,local_rows", [(2, [1500], None), (3, [300, 3100], 200)])
def test_hepmass_metrics_from_value_ranges(clients, every_numeric_in_ranges, workers, cuts, local_rows):
    df = make_hepmass(5000, random_state=4)  # 28 float columns of ~5,000 distinct values: binned domains
    m = Mondrian(k=10, quasi_identifiers=HEP_QI, target="label", sensitive="label", t=0.2, backend="cpu",
                 progress=False)
    res = run_distributed(m, clients[workers], frames=shards(df, cuts), local_rows=local_rows)
    cs = res.cluster.info["column_statistics"]
    assert cs["columns"] == HEP_QI and cs["rounds"] == 10 and cs["bytes_between_workers"] > 0
    check_same(m, df, res)
    assert len(m.metrics_["entropy_binned_columns"]) >= 20  # binned domains (and one of few values)
    assert res.metrics["gionis_tassa"]["total_bits"] > 0 and res.metrics["entropy_loss"] is not None


@pytest.mark.parametrize("kw", [dict(k=5, target="income"), dict(k=6, target="income", mode="relaxed"),
                                dict(k=5), dict(k=4, l=2, sensitive="occupation", target="income")],
                         ids=["k", "relaxed", "no-target", "l"])
def test_adult_with_missing_values_from_value_ranges(clients, every_numeric_in_ranges, adult_missing, kw):
    """Few distinct values (one bin each) and the missing value (a bin of its own, the last key)."""
    m = Mondrian(quasi_identifiers=ADULT_QI, backend="cpu", progress=False, **kw)
    res = run_distributed(m, clients[3], frames=shards(adult_missing, [700, 701]))
    assert res.cluster.info["column_statistics"]["columns"] == ["age", "hours-per-week"]
    check_same(m, adult_missing, res)


def test_a_column_only_missing_or_constant(clients, every_numeric_in_ranges, adult_missing):
    df = adult_missing.copy()
    df["hours-per-week"] = np.nan  # one distinct value: the missing one
    df["age"] = 40.0
    m = Mondrian(k=5, quasi_identifiers=ADULT_QI, target="income", backend="cpu", progress=False)
    res = run_distributed(m, clients[2], frames=shards(df, [2500]))
    check_same(m, df, res)


def test_the_default_threshold_keeps_small_columns_gathered(clients):
    df = make_hepmass(3000, random_state=1)
    m = Mondrian(k=10, quasi_identifiers=HEP_QI[:4], target="label", backend="cpu", progress=False)
    res = run_distributed(m, clients[2], frames=shards(df, [1000]))
    assert res.cluster.info["column_statistics"]["columns"] == []  # 3,000 rows x 2 targets: gathered
    check_same(m, df, res)


def test_splitters_cover_the_key_space_in_order():
    rng = np.random.default_rng(0)
    samples = [(np.sort(rng.integers(0, 2**32 - 1, size=s)), int(s * 10)) for s in (64, 3, 0, 200)]
    for w in (1, 2, 3, 8):
        sp = ranges.choose_splitters(samples, w)
        assert sp.shape == (w + 1,) and sp[0] == 0 and sp[-1] == 2**32 and (np.diff(sp) >= 0).all()
    assert (ranges.choose_splitters([(np.zeros(0), 0)], 4) == [0, 2**32, 2**32, 2**32, 2**32]).all()
    # heavy shards weigh more: the cut lies inside the heavy shard's keys
    sp = ranges.choose_splitters([(np.arange(10), 10), (np.arange(100, 110), 1000)], 2)
    assert 100 <= sp[1] < 110


def test_interval_joint_reads_rows_at_bin_starts_only():
    """A domain without per-value cumulative rows (the cluster's) gives the same mass."""
    rng = np.random.default_rng(3)
    counts = rng.integers(1, 6, size=900)
    dom = numeric_domain(counts, has_missing=False, xp=np, n_bins=16)
    a = rng.integers(0, 800, size=50)
    b = a + rng.integers(1, 100, size=50)
    th = rng.integers(0, 9, size=(50, 3))
    want = interval_joint(a, b, dom, th, np)
    import dataclasses

    bare = dataclasses.replace(dom, cum=None)
    got = interval_joint(a, b, bare, th, np, rows=(dom.cum[a], dom.cum[b]))
    np.testing.assert_allclose(got, want, rtol=1e-12)
