"""GPU backend == CPU backend: identical labels_ and a passing verification.

Skipped unless a GPU is usable at run time (gpuanon.backend.gpu_usable(), not an import check).
"""

from __future__ import annotations

import numpy as np
import pytest

from gpuanon import Mondrian
from gpuanon.backend import gpu_status, gpu_usable
from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS, HEPMASS_FEATURES, load_adult, make_hepmass

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_usable(), reason=f"no usable GPU: {gpu_status()[1]}"),
]


def _both(df, **kw):
    out = {}
    for be in ("cpu", "gpu"):
        m = Mondrian(backend=be, progress=False, **kw)
        o = m.fit_transform(df)
        assert m.backend_.name == be
        assert m.verification_.ok, m.verification_.failures
        out[be] = (m, o)
    return out


@pytest.fixture(scope="module")
def adult():
    return load_adult()


@pytest.mark.parametrize("k", [3, 10])
def test_adult_gpu_equals_cpu(adult, k):
    r = _both(adult, k=k, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income")
    (mc, oc), (mg, og) = r["cpu"], r["gpu"]
    assert isinstance(mg.labels_, np.ndarray)
    assert np.array_equal(mc.labels_, mg.labels_)
    assert mc.n_partitions_ == mg.n_partitions_
    assert mg.report_["achieved"]["k"] >= k
    assert oc.equals(og)


def test_adult_gpu_equals_cpu_with_l_and_t(adult):
    r = _both(adult, k=5, l=2, t=0.2, mode="relaxed", quasi_identifiers=ADULT_QUASI_IDENTIFIERS,
              sensitive="income", target="income")
    assert np.array_equal(r["cpu"][0].labels_, r["gpu"][0].labels_)


def test_hepmass_200k_gpu_equals_cpu():
    df = make_hepmass(200_000, random_state=0)
    r = _both(df, k=10, quasi_identifiers=HEPMASS_FEATURES, sensitive="label", output_format="minmax")
    (mc, oc), (mg, og) = r["cpu"], r["gpu"]
    assert np.array_equal(mc.labels_, mg.labels_)
    assert mg.report_["achieved"]["k"] >= 10
    assert mc.report_["n_classes"] == mg.report_["n_classes"]
    assert oc.equals(og)


def test_evaluation_models_on_the_gpu_backend():
    """Every model builds and predicts on the GPU backend (cuML / XGBoost CUDA / torch CUDA where present)."""
    from gpuanon.evaluate import MODEL_NAMES, make_model, predict_scores

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 8)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    for name in MODEL_NAMES:
        est, lib = make_model(name, "gpu", random_state=0)
        est.fit(X[:1500], y[:1500])
        pred, S = predict_scores(est, X[1500:], 2)
        assert (pred == y[1500:]).mean() > 0.8, (name, lib)
        if name == "mlp":
            import torch

            assert lib == "torch" and est.device_ == ("cuda" if torch.cuda.is_available() else "cpu")


def test_evaluation_gpu_backend_matches_cpu_protocol():
    from gpuanon.evaluate import run_evaluation

    df = load_adult().sample(4000, random_state=0)
    kw = dict(quasi_identifiers=ADULT_QUASI_IDENTIFIERS, target="income", random_state=0)
    cpu = run_evaluation(df, "raw;k=5", ["lr", "nb"], backend="cpu", **kw).results
    gpu = run_evaluation(df, "raw;k=5", ["lr", "nb"], backend="gpu", **kw).results
    # the same protections (identical Mondrian labels), so the same information loss
    np.testing.assert_allclose(cpu["ncp"].to_numpy(), gpu["ncp"].to_numpy())
    assert (np.abs(cpu["accuracy"].to_numpy() - gpu["accuracy"].to_numpy()) < 0.03).all()


_SEG_CASES = [(op, dt) for op, dts in {
    "minimum": ("uint32", "int32", "uint64", "int64"),
    "maximum": ("uint32", "int32", "uint64", "int64"),
    "add": ("uint32", "int32", "uint64", "int64", "float64", "float32"),
    "bitwise_or": ("uint32", "int32", "uint64"),
}.items() for dt in dts]


@pytest.mark.parametrize("op,dtype", _SEG_CASES)
def test_device_segmented_reduction_equals_reduceat(op, dtype):
    import cupy

    from gpuanon.backend import to_device, to_host
    from kernels.segmented import segment_reduce

    rng = np.random.default_rng(0)
    for n, p in [(1, 1), (100, 1), (70_000, 1), (70_000, 3), (70_000, 5000), (300_000, 299_000)]:
        cuts = np.sort(rng.choice(np.arange(1, n), size=min(p - 1, n - 1), replace=False)) if p > 1 else []
        starts = np.concatenate([[0], cuts]).astype(np.int64)
        if dtype.startswith("float"):
            x = rng.normal(size=(3, n)).astype(dtype)
        else:
            x = rng.integers(0, 1000, size=(3, n)).astype(dtype)
        want = getattr(np, op).reduceat(x, starts, axis=1)
        got = to_host(segment_reduce(op, to_device(x, cupy), to_device(starts, cupy), cupy, axis=1))
        if dtype.startswith("float"):
            _sums_close(got, want, x, starts)
        else:
            assert np.array_equal(got, want), (n, p)
        # a strided view (the kernel's in-place regroup hands these over) and the 1-D form
        sub = to_device(x, cupy)[:, : n - n // 3]
        st = starts[starts < sub.shape[1]]
        want = getattr(np, op).reduceat(x[:, : n - n // 3], st, axis=1)
        got = to_host(segment_reduce(op, sub, to_device(st, cupy), cupy, axis=1))
        _sums_close(got, want, x[:, : n - n // 3], st) if dtype.startswith("float") else \
            np.testing.assert_array_equal(got, want)
        got1 = to_host(segment_reduce(op, to_device(x[0], cupy), to_device(starts, cupy), cupy, axis=0))
        if dtype.startswith("float"):
            _sums_close(got1, np.add.reduceat(x[0], starts), x[0], starts)
        else:
            np.testing.assert_array_equal(got1, getattr(np, op).reduceat(x[0], starts))


def _sums_close(got, want, x, starts):
    """Float segment sums equal up to summation order: a sum in another order may differ by a few
    units of the dtype's epsilon times the sum of the magnitudes (not of the result, which can cancel
    to near 0: the first H100 run found float32 sums of 0.00018 off by 5e-7 from NumPy's, inside this)."""
    eps = np.finfo(np.asarray(want).dtype).eps
    bound = np.add.reduceat(np.abs(x).astype(np.float64), starts, axis=-1) * 8 * eps
    err = np.abs(np.asarray(got, dtype=np.float64) - np.asarray(want, dtype=np.float64))
    assert np.all(err <= bound + np.finfo(np.float64).tiny), float((err - bound).max())


def test_missing_device_primitive_is_an_error():
    import cupy

    from kernels.segmented import segment_reduce

    with pytest.raises(NotImplementedError, match="no device segmented"):
        segment_reduce("minimum", cupy.zeros(4, dtype=cupy.float64), cupy.asarray([0, 2]), cupy)


def test_gpu_pipeline_moves_few_bytes():
    df = make_hepmass(200_000, random_state=1)
    m = Mondrian(k=10, quasi_identifiers=list(HEPMASS_FEATURES), backend="gpu", output_format="minmax",
                 progress=False)
    m.fit_transform(df)
    t = m.report_["transfers"]
    assert t["counted"] == "device copies"
    inner = sum(v.get("to_host", {}).get("bytes", 0) for s, v in t["stages"].items()
                if s in ("partition", "class_statistics", "verify"))
    assert inner <= 4 * m.partition_info_["levels"] * m.n_partitions_ * 8, t
    metrics = t["stages"]["metrics"]
    assert metrics["to_host"]["bytes"] <= 64 * len(HEPMASS_FEATURES) + 4096, metrics  # numbers, not arrays


def _close(a, b, path=""):
    """Two metric dicts equal up to float rounding (GPU sums run in another order)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for key in a:
            _close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), path
    else:
        assert a == b, path


@pytest.mark.parametrize("kw", [
    dict(k=3, sensitive="income", target="income"),
    dict(k=5, target="income", hierarchies="auto"),
    dict(k=4, target="income", mode="relaxed", l=2, sensitive="income"),
])
def test_gpu_metrics_equal_cpu(adult, kw):
    r = _both(adult, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, **kw)
    _close(r["cpu"][0].metrics_, r["gpu"][0].metrics_)


def test_gpu_metrics_equal_cpu_on_hepmass():
    r = _both(make_hepmass(200_000, random_state=2), k=10, quasi_identifiers=list(HEPMASS_FEATURES), target="label",
              output_format="minmax")
    _close(r["cpu"][0].metrics_, r["gpu"][0].metrics_)


def test_planted_violations_caught_on_the_device():
    import cupy

    from gpuanon.backend import to_device
    from gpuanon.release.verify import verify_encoded

    codes = to_device(np.array([0, 0, 0, 1, 1, 1, 2, 2]), cupy)
    cells = [to_device(np.array([7, 8, 9], dtype=np.uint64), cupy), to_device(np.array([1, 1, 2], dtype=np.uint64), cupy)]
    sa = to_device(np.array([0, 1, 0, 1, 0, 1, 1, 1]), cupy)
    for kind in ("equal", "ordered", "kl"):
        r = verify_encoded(codes, cells, sa, np.array([0.5, 0.5]), k=3, l=2, l_kind="recursive", c=2.0,
                           t=0.3, t_distance=kind)
        assert r.n_classes == 3 and r.k == 2 and r.l == 1 and not r.ok


@pytest.mark.parametrize("fmt", ["range", "minmax", "mean"])
def test_gpu_output_and_report_equal_cpu(adult, fmt):
    r = _both(adult, k=5, l=2, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income",
              output_format=fmt, optimize=True)
    (mc, oc), (mg, og) = r["cpu"], r["gpu"]
    assert oc.astype(str).equals(og.astype(str))
    assert mc.report_["n_classes"] == mg.report_["n_classes"]
    assert mg.report_["transfers"]["counted"] == "device copies"


def test_gpu_minmax_of_every_numeric_dtype_equal_cpu():
    """A pandas frame from device classes: int32, float32, float64 and nullable-integer ``minmax``
    columns gathered on the device equal the CPU's, read in one copy per output dtype."""
    from numeric_tables import NUMERIC_QIS, SENSITIVE, every_numeric_dtype

    df = every_numeric_dtype(50_000)
    r = _both(df, k=6, l=2, quasi_identifiers=NUMERIC_QIS, sensitive=SENSITIVE, output_format="minmax")
    (mc, oc), (mg, og) = r["cpu"], r["gpu"]
    assert np.array_equal(mc.labels_, mg.labels_)
    assert oc.equals(og) and (oc.dtypes == og.dtypes).all()
    down = mg.report_["transfers"]["stages"]["output"]["to_host"]
    assert down["calls"] == 3 + (mg.report_["n_suppressed"] > 0), down


def _cudf():
    from gpuanon.backend import cudf_module

    mod = cudf_module()
    if mod is None:
        pytest.skip("cuDF is not installed")
    return mod


@pytest.mark.parametrize("fmt", ["range", "minmax", "mean"])
def test_cudf_frame_in_cudf_frame_out(adult, fmt):
    """A cuDF input gives a cuDF output built on the device, equal to the pandas run's."""
    _cudf()
    from gpuanon.backend import frame_to_device

    kw = dict(k=5, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income",
              output_format=fmt, progress=False)
    ref = Mondrian(backend="cpu", **kw).fit_transform(adult)
    gdf = frame_to_device(adult)
    m = Mondrian(backend="gpu", **kw)
    out = m.fit_transform(gdf)
    assert type(out).__module__.startswith("cudf")
    assert m.verification_.ok
    assert out.to_pandas().astype(str).equals(ref.astype(str))
    stages = m.report_["transfers"]["stages"]
    assert "input" in stages  # the one counted copy for encoding


def test_cudf_parquet_hepmass_minmax_rows_cross_at_most_once_each_way(tmp_path):
    """A Parquet file read by cuDF, 120k x 28 minmax: equal to the pandas run, the QIs keyed on the
    device (never uploaded) and the output built there (tests/test_device_resident.py on the double)."""
    _cudf()
    from gpuanon.backend import read_parquet_device

    df = make_hepmass(120_000, random_state=0)
    qi = list(HEPMASS_FEATURES)
    df.to_parquet(tmp_path / "h.parquet", index=False)
    kw = dict(k=10, quasi_identifiers=qi, sensitive="label", output_format="minmax", progress=False)
    ref = Mondrian(backend="cpu", **kw).fit_transform(df)
    m = Mondrian(backend="gpu", **kw)
    out = m.fit_transform(read_parquet_device(tmp_path / "h.parquet"))
    assert type(out).__module__.startswith("cudf")
    assert out.to_pandas().astype(str).equals(ref.astype(str))
    tr, row_bytes = m.report_["transfers"], int(df[qi].memory_usage(index=False).sum())
    assert tr["to_host_bytes"] <= 0.05 * row_bytes and tr["to_device_bytes"] <= 0.05 * row_bytes, tr
    assert "to_host" not in tr["stages"].get("output", {}), tr["stages"]


def test_cudf_frame_on_the_cpu_backend_and_missing_categories(adult):
    """A cuDF frame anonymized on the CPU backend comes back as cuDF (cudf.from_pandas); missing
    values of a categorical QI come out null in the device-built categorical, as on the CPU."""
    _cudf()
    from gpuanon.backend import frame_to_device

    df = adult.copy()
    df.loc[df.index[::7], "workclass"] = None
    kw = dict(k=5, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", progress=False)
    ref = Mondrian(backend="cpu", **kw).fit_transform(df)
    for be in ("cpu", "gpu"):
        out = Mondrian(backend=be, **kw).fit_transform(frame_to_device(df))
        assert type(out).__module__.startswith("cudf"), be
        host = out.to_pandas()
        assert host.astype(str).equals(ref.astype(str)), be
        assert int(host["workclass"].isna().sum()) == int(ref["workclass"].isna().sum()), be


def test_distpab_reads_a_cudf_frame_on_the_device():
    """DISTPAB on a cuDF frame (features taken with to_cupy) equals DISTPAB on the pandas frame."""
    _cudf()
    from gpuanon.backend import count_transfers, frame_to_device, to_host
    from gpuanon.perturb import DISTPAB

    df = make_hepmass(50_000, random_state=0)
    feats = list(HEPMASS_FEATURES)
    ref = DISTPAB(random_state=0, backend="gpu").fit(df[feats]).transform(df[feats])
    gdf = frame_to_device(df[feats])
    with count_transfers() as t:
        got = DISTPAB(random_state=0, backend="gpu").fit(gdf).transform(gdf)
    assert type(got).__module__.startswith("cupy")
    assert t.bytes(direction="to_device") < 1 << 20  # the rows never went through the host
    np.testing.assert_allclose(to_host(got), to_host(ref), rtol=1e-12, atol=1e-12)


def test_cudf_parquet_round_trip(adult, tmp_path):
    _cudf()
    from gpuanon.backend import read_parquet_device
    from gpuanon.output.io import write_table

    path = tmp_path / "adult.parquet"
    adult.to_parquet(path)
    gdf = read_parquet_device(path)
    m = Mondrian(k=5, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, output_format="minmax", backend="gpu",
                 progress=False)
    out = m.fit_transform(gdf)
    dest = tmp_path / "out.parquet"
    write_table(out, dest, metadata=m.output_metadata_)
    import pyarrow.parquet as pq

    assert b"gpuanon" in pq.read_schema(dest).metadata
    back = pq.read_table(dest).to_pandas()
    assert len(back) == len(out) and list(back.columns) == list(out.columns)


def test_cluster_on_the_gpu_equals_one_process(monkeypatch):
    """Dask workers on the GPU backend (CuPy on the workers, value ranges for every numeric QI):
    labels, output, verification and every metric equal to one CPU process's."""
    pytest.importorskip("distributed")
    from test_distributed_mondrian import check_same

    from gpuanon.cluster.connect import make_client
    from gpuanon.distributed import ranges
    from gpuanon.distributed.mondrian import run_distributed

    monkeypatch.setattr(ranges, "RANGE_MIN_PAIRS", 0)
    df = make_hepmass(60_000, random_state=1)
    kw = dict(k=10, quasi_identifiers=HEPMASS_FEATURES, target="label", sensitive="label", t=0.2, progress=False)
    client, cl = make_client(2)
    try:
        res = run_distributed(Mondrian(backend="gpu", **kw), client,
                              frames=[df.iloc[:25_000], df.iloc[25_000:]], local_rows=8_000)
    finally:
        client.close()
        cl.close()
    assert res.backend.name == "gpu"
    assert res.cluster.info["column_statistics"]["columns"] == list(HEPMASS_FEATURES)
    check_same(Mondrian(backend="cpu", **kw), df, res)
