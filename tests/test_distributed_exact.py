"""Exact QIs on a cluster: integers beyond 2**53 and dates / times are keyed by the same chunk /
combine / finalize dictionaries as in one process (:mod:`gpuanon.table.dictionaries`), so a ``local:2``
run publishes the same cells, classes, verification and metrics -- also when a shard holds no
integer beyond 2**53 and its neighbour does."""

import datetime
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask")
pytest.importorskip("distributed")

from gpuanon import Mondrian  # noqa: E402
from gpuanon.distributed.mondrian import run_distributed  # noqa: E402
from gpuanon.errors import SchemaError  # noqa: E402
from expected import flat  # noqa: E402

pytestmark = pytest.mark.slow  # Dask clusters


N = 900


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(11)
    big = (2**53 + rng.integers(1, 4000, N)).astype(np.int64)
    big[: N // 3] = 2**53 - rng.integers(0, 4000, N // 3)  # the first shard: nothing beyond 2**53
    ubig = (np.uint64(2**63) + rng.integers(0, 3000, N).astype(np.uint64))
    nullable = pd.array(2**60 + rng.integers(0, 900, N), dtype="Int64")
    nullable[rng.random(N) < 0.05] = pd.NA
    when = pd.Timestamp("2021-03-01 08:00") + pd.to_timedelta(rng.integers(0, 86_400 * 90, N), unit="s")
    day = pd.Timestamp("2019-01-01") + pd.to_timedelta(rng.integers(0, 700, N), unit="D")
    df = pd.DataFrame({"age": rng.integers(20, 70, N), "id": big, "uid": ubig, "nid": nullable,
                       "when": when.tz_localize("UTC").tz_convert("Europe/Berlin").astype("datetime64[us, Europe/Berlin]"),
                       "day": day, "date": [datetime.date(2020, 1, 1) + datetime.timedelta(days=int(d))
                                            for d in rng.integers(0, 400, N)],
                       "y": rng.integers(0, 3, N)})
    df.loc[[4, 7], "day"] = pd.NaT
    return df


def cells(out):
    return {c: out[c].astype(object).where(out[c].notna(), None).astype(str).tolist() for c in out.columns}


@pytest.mark.parametrize("qis", [["age", "id", "day"], ["id", "uid", "nid"], ["age", "when", "date"]])
def test_exact_qis_on_a_cluster_equal_one_process(clients, table, qis):
    m = Mondrian(k=5, quasi_identifiers=qis, sensitive="y", target="y", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_distributed(m, clients[2], frames=[table.iloc[: N // 3], table.iloc[N // 3: 2 * N // 3],
                                                     table.iloc[2 * N // 3:]], local_rows=200)
    out = m.fit_transform(table)
    np.testing.assert_array_equal(res.labels, m.labels_)
    assert cells(res.cluster.output) == cells(out)
    assert res.cluster.encoding_metadata == m.report_["encoding"]
    v, w = res.verification, m.verification_
    assert (v.n_classes, v.k, v.l, v.n_rows) == (w.n_classes, w.k, w.l, w.n_rows)
    for key in ("n_classes", "n_rows_out", "dm", "class_size"):
        assert res.metrics[key] == m.metrics_[key], key
    assert set(res.metrics) == set(m.metrics_)
    for key in m.metrics_:  # equal up to the order of floating-point sums
        assert flat(res.metrics[key]) == pytest.approx(flat(m.metrics_[key]), rel=1e-9, abs=1e-12), key


@pytest.mark.parametrize("fmt", ["minmax", "mean"])
def test_exact_qis_published_as_ranges_only_on_a_cluster(clients, table, fmt):
    m = Mondrian(k=5, quasi_identifiers=["age", "day"], target="y", output_format=fmt, progress=False)
    with pytest.raises(SchemaError, match="quasi-identifier 'day' .* publishes as ranges only; use --format range"):
        run_distributed(m, clients[2], frames=[table.iloc[:400], table.iloc[400:]])


def test_classes_beyond_2_53_apart_merge_by_keys_on_a_cluster(clients):
    """Values near -2**62 and 2**62: their float distances (the kernel's and the metrics' floats)
    share a value per 2048 near 2**63, so classes with different published cells have equal
    floats; the cluster tells classes apart by their keys, as one process does, and reads NCP on
    spans in integers."""
    rng = np.random.default_rng(5)
    x = np.array([-(2**62), 2**62])[rng.integers(0, 2, 300)] + rng.integers(0, 3000, 300)
    df = pd.DataFrame({"x": x.astype(np.int64), "y": rng.integers(0, 2, 300)})
    m = Mondrian(k=5, quasi_identifiers=["x"], target="y", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_distributed(m, clients[2], frames=[df.iloc[:150], df.iloc[150:]], local_rows=50)
        out = m.fit_transform(df)
    np.testing.assert_array_equal(res.labels, m.labels_)
    assert res.metrics["n_classes"] == m.metrics_["n_classes"] == out["x"].nunique()
    for key in m.metrics_:  # equal up to the order of floating-point sums
        assert flat(res.metrics[key]) == pytest.approx(flat(m.metrics_[key]), rel=1e-9, abs=0), key
