"""Copies between host and device: counted per stage, few, and only through gpuanon.backend.

On the CPU the backend counts the arrays that WOULD cross on a GPU (every array handed to
``to_host`` / ``to_device``), so these tests hold the pipeline to the device's copy budget on a
machine without one.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
from sklearn.base import clone

from gpuanon import Mondrian, SchemaError
from gpuanon import backend as B
from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS, HEPMASS_FEATURES, load_adult, make_hepmass

ROOT = pathlib.Path(__file__).resolve().parents[1]
INNER = ("partition", "optimize", "class_statistics", "verify")


def _inner_bytes(report, stages=INNER) -> int:
    return sum(v.get(d, {}).get("bytes", 0) for s, v in report["transfers"]["stages"].items() if s in stages
               for d in ("to_host", "to_device"))


def _budget(m) -> int:
    return 4 * m.partition_info_["levels"] * m.n_partitions_ * 8


@pytest.fixture(scope="module")
def adult():
    return load_adult()


def test_adult_copies_are_few(adult):
    m = Mondrian(k=3, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income",
                 backend="cpu", progress=False, optimize=True)
    m.fit_transform(adult)
    t = m.report_["transfers"]
    assert t["counted"].startswith("arrays that would cross")
    assert "encode" in t["stages"] and t["stages"]["encode"]["to_device"]["bytes"] >= len(adult) * 4
    assert 0 < _inner_bytes(m.report_) <= _budget(m), t


@pytest.fixture(scope="module")
def hep():
    return make_hepmass(200_000, random_state=3)


def _hep_run(hep, n_qi):
    m = Mondrian(k=10, quasi_identifiers=list(HEPMASS_FEATURES[:n_qi]), output_format="minmax", backend="cpu",
                 progress=False)
    m.fit_transform(hep)
    return m


@pytest.fixture(scope="module")
def hep_runs(hep):
    return {6: _hep_run(hep, 6), 28: _hep_run(hep, 28)}


def test_hepmass_copies_do_not_grow_with_the_number_of_qis(hep_runs):
    few, many = hep_runs[6], hep_runs[28]
    for m in (few, many):
        assert _inner_bytes(m.report_) <= _budget(m), m.report_["transfers"]
    per_class = [_inner_bytes(m.report_) / m.n_partitions_ for m in (few, many)]
    assert per_class[1] <= 1.5 * per_class[0] + 64, per_class


def test_metrics_copies_do_not_grow_with_the_number_of_qis(hep_runs):
    """The metrics run where the class statistics are: a few numbers per column come back (and the
    class-size histogram), nothing per class or per distinct value."""
    few, many = hep_runs[6], hep_runs[28]
    per_class = [_inner_bytes(m.report_, ("metrics",)) / m.n_partitions_ for m in (few, many)]
    assert per_class[1] <= 1.5 * per_class[0] + 64, per_class
    for n_qi, m in hep_runs.items():
        moved = _inner_bytes(m.report_, ("metrics",))
        assert 0 < moved <= 64 * n_qi + 4096, m.report_["transfers"]["stages"]["metrics"]
        assert m.report_["transfers"]["stages"]["metrics"]["to_host"]["calls"] <= 8 * n_qi + 16


def test_counter_counts_device_arrays_only_outside_simulation():
    with B.count_transfers() as real, B.count_transfers(simulate=True) as sim, B.stage("x"):
        B.to_host(np.zeros(3))
        B.to_device(np.zeros(5), np)
    assert real.bytes() == 0 and sim.bytes() == 24 + 40
    assert sim.to_dict()["stages"]["x"]["to_device"] == {"calls": 1, "bytes": 40}


def test_only_the_backend_touches_gpu_libraries():
    """No module but gpuanon/backend.py imports CuPy / cuDF / cuML or calls ``.get()`` on an array."""
    imp = re.compile(r"^\s*(?:import|from)\s+(cupy|cupyx|cudf|cuml|dask_cuda)\b", re.M)
    get = re.compile(r"\.get\(\)")
    bad = []
    for path in sorted([*ROOT.glob("gpuanon/**/*.py"), *ROOT.glob("kernels/*.py")]):
        if path.name == "backend.py" and path.parent.name == "gpuanon":
            continue
        text = path.read_text()
        bad += [f"{path.relative_to(ROOT)}: import {m}" for m in imp.findall(text)]
        bad += [f"{path.relative_to(ROOT)}: .get()" for _ in get.findall(text)]
    assert not bad, bad


def test_estimator_contract(adult):
    m = Mondrian(k=5, quasi_identifiers=["age", "education", "gender"], backend="cpu", progress=False)
    assert clone(m).get_params() == m.get_params()
    with pytest.raises(TypeError):
        Mondrian(5)  # keyword-only parameters
    df = adult.head(3000)
    out = m.fit_transform(df)
    assert m.n_classes_ == m.n_partitions_ and len(np.unique(m.labels_[m.labels_ >= 0])) == m.n_classes_
    assert m.transform(df.copy()).equals(out)  # an equal table is the fitted table
    with pytest.raises(SchemaError, match="fitted on one table"):
        m.transform(adult.iloc[3000:6000].reset_index(drop=True))


def test_fit_encoded_leaves_the_shared_table_alone(adult):
    from gpuanon.table.encoding import encode

    m = Mondrian(k=3, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income",
                 hierarchies="auto", rho=10, backend="cpu", progress=False)
    df = adult.head(5000)
    schema = m.validate(df)
    plan = m.hierarchy_plan(df, schema)
    be = B.get_backend("cpu", quiet=True)
    table = encode(df, schema, be.xp)
    m.fit_encoded(schema, table, be, plan=plan)
    assert not table.hierarchies  # the shared table binds nothing
    assert m.table_.hierarchies and all(c in table.columns for c in m.table_.columns)  # Columns are shared


def test_auto_runs_small_tables_on_the_cpu(monkeypatch):
    monkeypatch.setattr(B, "gpu_status", lambda: (True, ""))
    be = B.get_backend("auto", quiet=True, n_rows=1000)
    assert be.name == "cpu" and "below the GPU threshold" in be.reason
    monkeypatch.setenv("GPUANON_GPU_MIN_ROWS", "500")
    assert B.gpu_min_rows() == 500
    monkeypatch.setenv("GPUANON_GPU_MIN_ROWS", "lots")
    with pytest.raises(B.BackendError, match="GPUANON_GPU_MIN_ROWS"):
        B.gpu_min_rows()


def test_verifier_is_independent_of_the_anonymizer():
    """verify.py imports nothing that forms or describes the classes it checks."""
    import ast

    tree = ast.parse((ROOT / "gpuanon" / "release" / "verify.py").read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    forbidden = {"anonymize", "mondrian", "criteria", "generalize", "optimize", "classes", "kernels", "metrics",
                 "hierarchy"}
    assert not {m for m in names if forbidden & set(m.split("."))}, names


def test_planted_violation_in_published_cells_is_caught():
    from gpuanon.release.verify import verify_encoded

    # three classes of cells; the third has 2 rows (k = 3 fails) and one sensitive value (l = 2 fails)
    codes = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    cells = [np.array([7, 8, 9], dtype=np.uint64), np.array([1, 1, 2], dtype=np.uint64)]
    sa = np.array([0, 1, 0, 1, 0, 1, 1, 1])
    r = verify_encoded(codes, cells, sa, np.array([0.5, 0.5]), k=3, l=2, t=0.6)
    assert r.n_classes == 3 and r.k == 2 and r.l == 1 and not r.ok
    assert any("k-anonymity" in f for f in r.failures) and any("l-diversity" in f for f in r.failures)
    # two classes with equal cells are one class: merging repairs nothing silently, it is counted
    cells[0][2] = 8
    cells[1][2] = 1
    r = verify_encoded(codes, cells, sa, np.array([0.5, 0.5]), k=3, l=2)
    assert r.n_classes == 2 and r.k == 3 and r.ok


def test_shared_codes_group_like_per_column_codes():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from gpuanon.release.verify import verify_encoded

    @given(st.integers(0, 10_000), st.integers(1, 60), st.integers(1, 4))
    @settings(max_examples=60, deadline=None)
    def check(seed, n_codes, n_cols):
        rng = np.random.default_rng(seed)
        codes = rng.integers(0, n_codes, 400)
        d = [rng.integers(0, 4, n_codes).astype(np.uint64) for _ in range(n_cols)]
        sa = rng.integers(0, 3, 400)
        q = np.bincount(sa, minlength=3) / 400
        a = verify_encoded(codes, d, sa, q, k=3, l=2, t=0.3)
        b = verify_encoded([codes] * n_cols, d, sa, q, k=3, l=2, t=0.3)
        assert a.to_dict() == b.to_dict()
        tuples = {tuple(int(x[c]) for x in d) for c in codes}
        assert a.n_classes == len(tuples)

    check()


def test_every_long_stage_says_when_it_ends(adult, caplog, monkeypatch):
    import logging

    monkeypatch.setattr(Mondrian, "STAGE_LOG_SECONDS", 0.0)
    with caplog.at_level(logging.INFO, logger="gpuanon"):
        Mondrian(k=5, quasi_identifiers=["age", "education"], backend="cpu").fit_transform(adult.head(2000))
    done = [r.getMessage().split(" done")[0] for r in caplog.records if " done in " in r.getMessage()]
    assert done == ["encode", "partition", "class_statistics", "generalize", "verify", "metrics"], done


@pytest.mark.parametrize("fmt", ["minmax", "range", "mean"])
def test_output_made_after_verify_and_metrics_changes_nothing(adult, monkeypatch, fmt):
    """A table above OUTPUT_FIRST_ROWS rows is verified and measured before its output frame is made: the same
    frame, verification, metrics and copies per stage as the order generalize -> verify -> metrics (the text
    cross-check of small tables off in both)."""
    from gpuanon.anonymize.pipeline import InProcess

    df = adult.head(3000)

    def run():
        m = Mondrian(k=4, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", l=2, output_format=fmt,
                     backend="cpu", progress=False)
        return m, m.fit_transform(df)

    monkeypatch.setattr(InProcess, "TEXT_CHECK_ROWS", 0)
    monkeypatch.setattr(InProcess, "OUTPUT_FIRST_ROWS", 10 ** 9)
    (m1, o1) = run()
    monkeypatch.setattr(InProcess, "OUTPUT_FIRST_ROWS", 0)
    (m2, o2) = run()
    assert list(o1.columns) == list(o2.columns) and o1.equals(o2)
    assert m1.report_["transfers"] == m2.report_["transfers"]
    assert m1.report_["transfers"]["stages"]["output"]["to_host"]["calls"] > 0
    assert m1.verification_.to_dict() == m2.verification_.to_dict()
    assert m1.report_["metrics"] == m2.report_["metrics"]
