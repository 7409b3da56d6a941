"""The runner owns the pipeline (issue 31, items 1 and 2): the plan is made once per fit, whichever
runner runs it; ``cluster=`` resolves through the registry, so ``anonymize`` never imports
``distributed``; a run opens its cluster once; the command line writes a cluster's output directory
together with its report, all or none."""

from __future__ import annotations

import ast
import json
import os
import pathlib

import numpy as np
import pytest

from gpuanon import Mondrian
from gpuanon.anonymize import plan as plan_mod
from gpuanon.anonymize.pipeline import InProcess
from gpuanon.anonymize.result import RunOptions
from gpuanon.anonymize.runners import runner_for
from gpuanon.cli import main
from gpuanon.datasets import load_adult
from gpuanon.errors import PrivacyError, SchemaError

ROOT = pathlib.Path(__file__).resolve().parents[1]
QI = ["age", "education", "gender"]


@pytest.fixture(scope="module")
def adult():
    return load_adult().head(1500)


@pytest.fixture
def plans_made(monkeypatch):
    """Count ``Plan.of`` (every plan made) while the test runs."""
    calls = []
    original = plan_mod.Plan.of.__func__

    def counting(cls, est, n_rows):
        calls.append(n_rows)
        return original(cls, est, n_rows)

    monkeypatch.setattr(plan_mod.Plan, "of", classmethod(counting))
    return calls


@pytest.fixture
def clusters_opened(monkeypatch):
    """Count the cluster handles made (every ``open_cluster`` makes one, a client handed in too)."""
    pytest.importorskip("distributed")
    from gpuanon.cluster import connect as cluster_mod

    opened = []
    init = cluster_mod.ClusterHandle.__init__

    def counting(self, *a, **kw):
        opened.append(a[-1] if a else kw.get("description"))
        init(self, *a, **kw)

    monkeypatch.setattr(cluster_mod.ClusterHandle, "__init__", counting)
    return opened


def test_plan_made_once_per_fit_and_carried_by_the_result(adult, plans_made):
    m = Mondrian(k=5, l=2, quasi_identifiers=QI, sensitive="income", backend="cpu", progress=False)
    out = m.fit_transform(adult)
    assert plans_made == [len(adult)]  # fit and publish: one plan
    assert m.result_.plan.k == 5 and m.result_.plan.l == 2 and m.result_.plan.schema == m.schema_
    assert m.report_["requested"]["k"] == 5 and m.report_["achieved"]["k"] >= 5 and len(out) == len(adult)
    m.transform(adult)  # publishing again makes no plan
    assert plans_made == [len(adult)]


def test_every_parameter_checked_in_the_plan_once(adult, plans_made):
    """The k rule and the other parameters: one place (``Plan.of``), the messages as before."""
    with pytest.raises(PrivacyError, match=r"k = 5000 is larger than the table \(1500 rows\); choose k <= 1500"):
        Mondrian(k=5000, quasi_identifiers=QI, backend="cpu").fit(adult)
    with pytest.raises(SchemaError, match=r"k must be an integer >= 2, got 1; k-anonymity needs k >= 2"):
        Mondrian(k=1, quasi_identifiers=QI, backend="cpu").fit(adult)
    with pytest.raises(SchemaError, match="mode 'loose' is not one of strict, relaxed"):
        Mondrian(k=3, mode="loose", quasi_identifiers=QI, backend="cpu").fit(adult)
    assert len(plans_made) == 3
    src = (ROOT / "gpuanon/distributed/checks.py").read_text()
    assert "check_k" not in src and "k-anonymity needs k >= 2" not in src  # the cluster's copy is gone


def test_the_pipeline_is_the_runners():
    """The estimator builds the plan, picks the runner and adopts the result: under 250 lines, and it
    never asks which runner ran (no ``cluster`` read but the parameter it hands to the registry)."""
    src = (ROOT / "gpuanon/anonymize/mondrian.py").read_text()
    assert len(src.splitlines()) < 250
    tree = ast.parse(src)
    reads = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "cluster"]
    assert len(reads) == 2  # self.cluster = cluster (the parameter), runner_for(self.cluster, ...)
    result_src = (ROOT / "gpuanon/anonymize/result.py").read_text()
    assert "self.cluster is None" not in result_src and "self.cluster is not None" not in result_src


def test_anonymize_never_imports_distributed():
    for path in (ROOT / "gpuanon/anonymize").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert "distributed" not in (node.module or ""), path.name
            elif isinstance(node, ast.Import):
                assert not any("distributed" in a.name for a in node.names), path.name


def test_registry_picks_the_runner():
    assert isinstance(runner_for(None, RunOptions()), InProcess)
    pytest.importorskip("distributed")
    from gpuanon.distributed.estimator import OnCluster

    r = runner_for("local:2", RunOptions(backend="cpu"), local_rows=100)
    assert isinstance(r, OnCluster) and r.local_rows == 100 and r.options.backend == "cpu"


@pytest.mark.slow
def test_estimator_on_a_cluster_plans_once_and_opens_once(adult, plans_made, clusters_opened):
    kw = dict(k=5, quasi_identifiers=QI, backend="cpu", progress=False)
    one = Mondrian(**kw).fit_transform(adult)
    plans_made.clear()
    m = Mondrian(**kw, cluster="local:2:threads")
    out = m.fit_transform(adult)
    assert plans_made == [len(adult)] and len(clusters_opened) == 1
    assert list(out.columns) == list(one.columns)
    assert all(out[c].astype(str).tolist() == one[c].astype(str).tolist() for c in one.columns)
    assert m.result_.plan.k == 5 and m.report_["cluster"]["n_workers"] == 2
    assert np.array_equal(m.labels_, Mondrian(**kw).fit(adult).labels_)


@pytest.mark.slow
def test_command_on_a_cluster_opens_it_once(adult, tmp_path, plans_made, clusters_opened, monkeypatch):
    monkeypatch.setenv("GPUANON_BACKEND", "cpu")
    src = tmp_path / "in"
    src.mkdir()
    adult.iloc[:700].to_parquet(src / "part-0.parquet", index=False)
    adult.iloc[700:].to_parquet(src / "part-1.parquet", index=False)
    out, rep = tmp_path / "out", tmp_path / "r.json"
    rc = main(["anonymize", str(src), "--cluster", "local:2:threads", "--qi", ",".join(QI), "--k", "5", "--out",
               str(out), "--report", str(rep), "--quiet"])
    assert rc == 0
    assert len(clusters_opened) == 1 and plans_made == [len(adult)]
    assert sorted(os.listdir(out)) == ["part-00000.parquet", "part-00001.parquet"]
    report = json.loads(rep.read_text())
    assert report["n_rows_in"] == len(adult) and report["cluster"]["n_workers"] == 2
    assert sorted(os.listdir(tmp_path)) == ["in", "out", "r.json"]  # no temporary left


@pytest.mark.slow
def test_command_on_a_cluster_writes_all_or_nothing(adult, tmp_path, monkeypatch, capsys):
    """A failure after the workers wrote the table (here: the page) leaves neither the table's directory
    nor the report, nor a temporary."""
    pytest.importorskip("distributed")
    import gpuanon.report as report_mod

    monkeypatch.setenv("GPUANON_BACKEND", "cpu")

    def broken(report):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_mod, "render_html", broken)
    src = tmp_path / "in.parquet"
    adult.to_parquet(src, index=False)
    rc = main(["anonymize", str(src), "--cluster", "local:2:threads", "--qi", ",".join(QI), "--k", "5", "--out",
               str(tmp_path / "out"), "--report", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["in.parquet"], err
