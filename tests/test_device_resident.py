"""A device-resident input (a cuDF frame; here the cuDF double of tests/cudf_double.py on the CuPy
double) on the GPU backend: the output equals the CPU's from the same pandas frame, and the row data
of its plain numeric QIs does not cross the bus at all (their checks and profile made on the device,
:mod:`gpuanon.table.resident`), counted by the report's ``transfers``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("cupy", reason="the device double reads CuPy's API from the cupy-cuda12x wheel")

from cudf_double import CudfDouble, DeviceDoubleError, device_frame_of  # noqa: E402
from cupy_double import DeviceDouble  # noqa: E402
from gpuanon import Mondrian  # noqa: E402
from gpuanon import backend as B  # noqa: E402
from gpuanon.datasets import HEPMASS_FEATURES, make_hepmass  # noqa: E402


def _mixed(n: int = 6000, seed: int = 3) -> pd.DataFrame:
    """float32, float64 with missing values, int32, int16 and a text QI; a text sensitive attribute."""
    rng = np.random.default_rng(seed)
    f64 = rng.normal(50, 10, n).round(2)
    f64[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame({"a": rng.normal(0, 1, n).astype(np.float32), "b": f64,
                         "c": rng.integers(-500, 500, n).astype(np.int32), "d": rng.integers(0, 40, n).astype(np.int16),
                         "job": rng.choice(np.array(["x", "y", "z", "w"], dtype=object), n),
                         "dis": rng.choice(np.array(["flu", "cold", "none"], dtype=object), n)})


def _fit_resident(df: pd.DataFrame, **kw):
    """The fit on the CPU from ``df``, and on the double from ``df`` resident on its device."""
    mc = Mondrian(backend="cpu", progress=False, **kw)
    oc = mc.fit_transform(df)
    dev = DeviceDouble()
    dev.cudf = CudfDouble(dev)
    with B.use_device_module(dev):
        src = device_frame_of(df, dev)
        assert B.is_device_frame(src) and B.cudf_module() is dev.cudf
        mg = Mondrian(backend="gpu", progress=False, **kw)
        og = mg.fit_transform(src)
        assert B.is_device_frame(og)
        host = B.frame_to_host(og)
        labels = mg.labels_
    return mc, oc, mg, host, labels, dev


def _same(mc, oc, mg, og, labels, dev):
    np.testing.assert_array_equal(mc.labels_, labels)
    pd.testing.assert_frame_equal(oc.reset_index(drop=True), og.reset_index(drop=True))
    assert mc.metrics_ == mg.metrics_ or pd.Series(mc.metrics_).equals(pd.Series(mg.metrics_))
    s = dev.stats.summary()
    assert s["syncs_escaped"] == 0 and s["uploads_escaped"] == 0, s["escaped_sites"]


@pytest.mark.parametrize("fmt", ["minmax", "mean", "range"])
def test_mixed_columns_equal_the_cpu(fmt):
    df = _mixed()
    mc, oc, mg, og, labels, dev = _fit_resident(df, k=5, l=2, quasi_identifiers=["a", "b", "c", "d", "job"],
                                                sensitive="dis", output_format=fmt)
    _same(mc, oc, mg, og, labels, dev)
    enc = mg.report_["transfers"]["stages"]["encode"].get("to_device", {"bytes": 0})
    # the plain numeric QIs are keyed where they are: only the text QI's keys (uint32), the SA codes
    # (int32) and the missing-value blocks (int64) go up
    assert enc["bytes"] == len(df) * (4 + 4 + 8), enc
    assert dev.stats.cudf_calls[("input", "to_cupy")] == 2  # one matrix per dtype: float32; float64 and ints


def test_hepmass_minmax_row_data_crosses_at_most_once_each_way():
    n = 120_000  # above the text cross-check's 100,000 rows, as at 2M
    df = make_hepmass(n, random_state=0)
    qi = list(HEPMASS_FEATURES)
    mc, oc, mg, og, labels, dev = _fit_resident(df, k=10, quasi_identifiers=qi, sensitive="label",
                                                output_format="minmax")
    _same(mc, oc, mg, og, labels, dev)
    tr = mg.report_["transfers"]
    row_bytes = int(df[qi].memory_usage(index=False).sum())
    # the QIs never come down (checked and profiled on the device: their facts come, a few numbers
    # each) and never go up; the sensitive column comes down once and its codes go up
    assert tr["to_host_bytes"] <= 0.05 * row_bytes, tr
    assert tr["to_device_bytes"] <= 0.05 * row_bytes, tr
    assert tr["stages"]["input"]["to_host"]["bytes"] == n + 6 * len(qi) * 8 + 8, tr["stages"]["input"]
    assert "to_host" not in tr["stages"].get("output", {}), tr["stages"]["output"]
    assert dev.stats.cudf_calls[("output", "Series(array)")] == 2 * len(qi)  # one gather per column


def test_the_double_refuses_a_host_read_of_a_device_frame():
    dev = DeviceDouble()
    dev.cudf = CudfDouble(dev)
    src = device_frame_of(pd.DataFrame({"a": [1.0, 2.0]}), dev)
    with pytest.raises(DeviceDoubleError):
        np.asarray(src["a"])
    with pytest.raises(DeviceDoubleError):
        src["a"].to_numpy()
    with pytest.raises(DeviceDoubleError):
        dev.cudf.DataFrame(pd.DataFrame({"a": [1.0]}))  # an uncounted upload


def _schema_both(df, caplog, **roles):
    """The schema (or its error) and the warnings of ``df`` on the CPU and from the double's device."""
    import logging

    from gpuanon.table.resident import split_resident
    from gpuanon.table.schema import Schema

    out = []
    for resident in (False, True):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            try:
                if resident:
                    dev = DeviceDouble()
                    dev.cudf = CudfDouble(dev)
                    with B.use_device_module(dev):
                        host, res = split_resident(device_frame_of(df, dev), roles, dev)
                        got = Schema.from_frame(host, **roles, resident=res).to_dict()
                else:
                    got = Schema.from_frame(df, **roles).to_dict()
            except Exception as exc:  # the same error both ways
                got = (type(exc).__name__, str(exc))
        out.append((got, sorted(r.getMessage() for r in caplog.records)))
    return out


def test_facts_give_the_host_checks_and_warnings(caplog):
    """Identifier-like whole numbers, an entirely missing column, fractional measurements, whole
    floats: the same kinds and warnings from the device facts as from the host values."""
    n = 400
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"id": np.arange(n, dtype=np.int32), "gone": np.full(n, np.nan),
                       "m": rng.normal(0, 1, n).astype(np.float32), "w": np.arange(n, dtype=np.float64) % 7,
                       "u": np.arange(n, dtype=np.float64), "s": rng.choice(np.array(["a", "b"], dtype=object), n)})
    df.loc[3, "u"] = np.nan
    (cpu, cpu_log), (gpu, gpu_log) = _schema_both(df, caplog, quasi_identifiers=["id", "gone", "m", "w", "u"],
                                                  sensitive="s")
    assert cpu == gpu and cpu_log == gpu_log
    assert any("'id'" in m and "looks like an identifier" in m for m in cpu_log), cpu_log
    assert any("'u'" in m and "looks like an identifier" in m for m in cpu_log), cpu_log
    assert any("'gone'" in m and "entirely missing" in m for m in cpu_log), cpu_log


def test_facts_refuse_infinite_values_and_unknown_columns_as_the_host_does(caplog):
    df = pd.DataFrame({"a": [1.0, np.inf, 3.0] * 10, "b": np.arange(30, dtype=np.int16), "s": ["x", "y", "z"] * 10})
    (cpu, _), (gpu, _) = _schema_both(df, caplog, quasi_identifiers=["a", "b"], sensitive="s")
    assert cpu == gpu and cpu[0] == "SchemaError" and "'a' holds infinite values" in cpu[1]
    (cpu, _), (gpu, _) = _schema_both(df, caplog, quasi_identifiers=["b", "bb"], sensitive="s")
    assert cpu == gpu and cpu[0] == "SchemaError" and "'bb' is not a column" in cpu[1]


def test_only_the_host_columns_come_to_the_host():
    """The numeric QIs, the identifiers and the passed-through columns stay: the input stage copies
    the text QI and the sensitive attribute, and the plain QIs' facts (a few numbers each) and the
    missing masks of those with missing values (one byte a row)."""
    df = _mixed(3000)
    df["extra"] = np.arange(len(df), dtype=np.float64)  # passed through, never read on the host
    mc, oc, mg, og, labels, dev = _fit_resident(df, k=5, l=2, quasi_identifiers=["a", "b", "c", "d", "job"],
                                                sensitive="dis", output_format="minmax")
    _same(mc, oc, mg, og, labels, dev)
    got = mg.report_["transfers"]["stages"]["input"]["to_host"]["bytes"]
    text = int(df[["job", "dis"]].memory_usage(deep=True, index=False).sum())
    facts = 6 * 4 * 8 + 2 * 8  # six float64 facts of four columns; the distinct counts of the whole 'c', 'd'
    assert got == text + facts + len(df) * 1, (got, text)  # 'b' has missing values: its mask


@pytest.mark.parametrize("fmt", ["minmax", "range"])
def test_categorical_codes_stay_on_the_device(fmt):
    """A categorical QI of a cuDF frame (missing values, a category no row has, categories not in
    the order rows show them): its codes are numbered and keyed on the device, only the categories and
    two numbers per category come to the host, and the output equals the CPU's from pandas."""
    df = _mixed(4000)
    rng = np.random.default_rng(5)
    job = rng.choice(np.array(["nurse", "clerk", "cook", None], dtype=object), len(df), p=[0.5, 0.3, 0.15, 0.05])
    df["job"] = pd.Categorical(job, categories=["unused", "cook", "nurse", "clerk"])
    qi = ["a", "b", "c", "d", "job"]
    mc, oc, mg, og, labels, dev = _fit_resident(df, k=5, quasi_identifiers=qi, sensitive="dis", output_format=fmt)
    _same(mc, oc, mg, og, labels, dev)
    assert dev.stats.cudf_calls[("input", "cat.codes")] == 1
    assert mc.table_.encoding_metadata() == mg.table_.encoding_metadata()
    tr = mg.report_["transfers"]["stages"]
    cats = int(df["job"].cat.categories.memory_usage(deep=True))
    text = int(df[["dis"]].memory_usage(deep=True, index=False).sum())
    facts = 6 * 4 * 8 + 2 * 8 + len(df)  # the numeric QIs' facts, distinct counts and 'b''s missing mask
    assert tr["input"]["to_host"]["bytes"] == text + cats + 2 * 5 * 8 + facts, tr["input"]  # first rows, counts
    assert tr["input"]["to_device"]["bytes"] == 5 * 8, tr["input"]  # the renumbering: one per category and missing
    # up: the key table (one per value rows have), the SA codes and the missing-value blocks
    assert tr["encode"]["to_device"]["bytes"] == 4 * 4 + len(df) * (4 + 8), tr["encode"]


def test_categorical_with_a_target_is_read_on_the_host():
    """With a target the category counts pair with its codes: the column comes to the host, as before."""
    df = _mixed(3000)
    df["job"] = pd.Categorical(df["job"])
    df["y"] = (df["c"] > 0).astype(np.int8)
    mc, oc, mg, og, labels, dev = _fit_resident(df, k=5, quasi_identifiers=["a", "job"], sensitive="dis", target="y",
                                                output_format="minmax")
    _same(mc, oc, mg, og, labels, dev)
    assert ("input", "cat.codes") not in dev.stats.cudf_calls
