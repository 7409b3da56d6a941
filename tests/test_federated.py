"""Federated learning on Flower (SPEC 10): splits, FedAvg, the protocol (what leaves a silo), reproducibility.

Most tests drive the real ServerApp and ClientApp code through an in-process Flower ``Grid`` (every
message goes through the ClientApp with its mods, as on a SuperNode, without starting Ray); one test
runs Flower's simulation runtime through the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.serverapp import Grid  # noqa: E402

from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from gpuanon.errors import InputError  # noqa: E402
from gpuanon.federated import protocol as P  # noqa: E402
from gpuanon.federated.client_app import app as client_app  # noqa: E402
from gpuanon.federated.experiment import plan  # noqa: E402
from gpuanon.federated.run import make_config  # noqa: E402
from gpuanon.federated.server_app import SiloFedAvg, serve  # noqa: E402
from gpuanon.federated.splits import split_silos  # noqa: E402


@pytest.fixture(autouse=True)
def _server_identity():
    """What Flower sets in a ServerApp's process before the app creates messages."""
    old = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 1, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = old


class LocalGrid(Grid):
    """Flower's Grid over ClientApps in this process: each node keeps its Context (its state) across
    messages, as a SuperNode does; every message and reply is recorded for the assertions."""

    def __init__(self, n: int):
        self.nodes = list(range(101, 101 + n))
        self.contexts = {nid: Context(run_id=1, node_id=nid, node_config={"partition-id": i, "num-partitions": n},
                                      state=RecordDict(), run_config={}) for i, nid in enumerate(self.nodes)}
        self.sent: list = []
        self.replies: list = []

    def set_run(self, run):  # pragma: no cover - not used in process
        pass

    @property
    def run(self):  # pragma: no cover
        return None

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):  # pragma: no cover
        return Message(content, dst_node_id=dst_node_id, message_type=message_type, group_id=group_id)

    def get_node_ids(self):
        return list(self.nodes)

    def push_messages(self, messages):  # pragma: no cover
        raise NotImplementedError

    def pull_messages(self, message_ids):  # pragma: no cover
        raise NotImplementedError

    def send_and_receive(self, messages, *, timeout=None):
        out = []
        for m in messages:
            self.sent.append(m)
            reply = client_app(m, self.contexts[m.metadata.dst_node_id])
            self.replies.append((m.metadata.message_type, reply))
            out.append(reply)
        return out


def _run(cfg):
    grid = LocalGrid(cfg["silos"])
    doc = serve(grid, Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={}), cfg)
    return doc, grid


def _cfg(**kw):
    base = dict(rows=1500, silos=3, rounds=2, local_epochs=1, seed=3)
    base.update(kw)
    return make_config("adult", **base)


# ---------------------------------------------------------------- splits
def test_iid_split_is_stratified_disjoint_and_seeded():
    y = np.repeat([0, 1, 2], [500, 300, 200])
    parts = split_silos(y, 4, seed=1)
    assert sorted(np.concatenate(parts).tolist()) == list(range(1000))
    for c, n in ((0, 500), (1, 300), (2, 200)):
        counts = [int((y[p] == c).sum()) for p in parts]
        assert max(counts) - min(counts) <= 1 and sum(counts) == n
    again = split_silos(y, 4, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    assert not all(np.array_equal(a, b) for a, b in zip(parts, split_silos(y, 4, seed=2)))


def test_dirichlet_split_skews_labels_and_is_seeded():
    y = np.repeat([0, 1], [3000, 1000])
    parts = split_silos(y, 10, split="dirichlet", alpha=0.5, seed=0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(4000))
    shares = np.array([(y[p] == 1).mean() for p in parts])
    assert shares.max() - shares.min() > 0.3          # label skew: IID shares would all be 0.25
    assert all(np.array_equal(a, b) for a, b in zip(parts, split_silos(y, 10, split="dirichlet", alpha=0.5, seed=0)))
    with pytest.raises(InputError):
        split_silos(y, 3, split="dirichlet", alpha=0.0)


# ---------------------------------------------------------------- FedAvg
def _reply(weights, n, silo):
    return Message(RecordDict({"arrays": ArrayRecord([w.copy() for w in weights]),
                               "metrics": MetricRecord({"num-examples": n, "train-loss": 0.5, "silo": silo})}),
                   dst_node_id=1, message_type="train")


def test_fedavg_of_identical_clients_equals_each_client():
    rng = np.random.default_rng(0)
    w = [rng.normal(size=(7, 5)).astype(np.float32), rng.normal(size=5).astype(np.float32)]
    strat = SiloFedAvg(3, {11: 0, 12: 1, 13: 2})
    strat._down = {0: 0, 1: 0, 2: 0}
    arrays, metrics = strat.aggregate_train(1, [_reply(w, n, s) for s, n in enumerate((100, 2500, 7))])
    out = arrays.to_numpy_ndarrays()
    assert all(np.array_equal(a, b) for a, b in zip(out, w))
    assert int(metrics["num-examples"]) == 2607


def test_fedavg_weighted_average_is_exact_and_order_free():
    rng = np.random.default_rng(1)
    ws = [[rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)] for _ in range(3)]
    counts = [7591, 7590, 7618]
    expect = [(sum(np.float64(c) * w[j].astype(np.float64) for w, c in zip(ws, counts)) / sum(counts))
              .astype(np.float32) for j in range(2)]
    strat = SiloFedAvg(3, {11: 0, 12: 1, 13: 2})
    strat._down = {0: 0, 1: 0, 2: 0}
    replies = [_reply(w, c, s) for s, (w, c) in enumerate(zip(ws, counts))]
    a1 = strat.aggregate_train(1, replies)[0].to_numpy_ndarrays()
    a2 = strat.aggregate_train(2, replies[::-1])[0].to_numpy_ndarrays()   # replies in another order
    for got, got2, e in zip(a1, a2, expect):
        assert np.array_equal(got, e) and np.array_equal(got2, e)
    # a hand check: n = (1, 3) gives (w1 + 3 w2) / 4 exactly
    assert P.fedavg([[np.float32([2.0])], [np.float32([6.0])]], [1, 3])[0].tolist() == [5.0]
    with pytest.raises(InputError):
        P.fedavg([[np.float32([1.0])]], [0])


# ---------------------------------------------------------------- the protocol, end to end in process
def _assert_only_weights_counts_stats(grid, cfg, doc):
    """Every reply that left a silo: only the protocol's records; never a row of any table."""
    n_train = {i: len(idx) for i, idx in enumerate(plan(cfg).silos)}
    n_params = doc["n_parameters"]
    kinds = set()
    for mtype, reply in grid.replies:
        kinds.add(mtype)
        P.check_outbound(mtype, reply.content)            # what the silo's own mod enforced
        for name, rec in reply.content.items():
            assert name in P.OUTBOUND[mtype]
            if isinstance(rec, ArrayRecord):
                for key, a in rec.items():
                    arr = a.numpy()
                    assert arr.dtype.kind == "f"
                    # no array is as long as a silo's row count: no column, no row set leaves
                    assert all(dim not in n_train.values() for dim in arr.shape) or arr.size == 1, (name, key)
        if mtype == "train":
            assert set(reply.content.keys()) == {"arrays", "metrics"}
            assert sum(a.numpy().size for a in reply.content["arrays"].values()) == n_params
            assert set(reply.content["metrics"].keys()) == {"num-examples", "train-loss", "silo"}
        if mtype == "query.prepare" and "categories" in reply.content:
            vals = json.loads(reply.content["categories"]["values"])
            assert all(isinstance(v, list) and len(v) == len(set(v)) for v in vals.values())  # sets, not columns
    return kinds


@pytest.mark.slow
def test_k_anonymous_silos_send_only_weights_counts_and_category_sets():
    cfg = _cfg(protection="k=5")
    doc, grid = _run(cfg)
    kinds = _assert_only_weights_counts_stats(grid, cfg, doc)
    assert kinds == {"query.prepare", "query.encode", "train"}
    assert len(doc["rounds"]) == 2 and doc["final"] == doc["rounds"][-1]
    for key in ("accuracy", "precision", "recall", "f1", "loss"):
        assert key in doc["final"]
    assert [s["silo"] for s in doc["silos"]] == [0, 1, 2]
    assert all(s["classes"] and s["classes"] <= s["rows"] / 5 for s in doc["silos"])   # k = 5 classes
    assert sum(s["rows_in"] for s in doc["silos"]) == len(plan(cfg).train)
    # bytes per round: down = the global model to each silo, up = each silo's weights
    b = doc["bytes"]["per_round"][0]
    assert len(b["per_silo"]) == 3 and all(s["up"] >= 4 * doc["n_parameters"] for s in b["per_silo"])


def test_a_silo_that_tries_to_send_rows_is_stopped_by_its_guard():
    ctx = Context(run_id=1, node_id=5, node_config={"partition-id": 0}, state=RecordDict(), run_config={})

    msg = Message(RecordDict({"config": ConfigRecord({"experiment": json.dumps(_cfg())})}),
                  dst_node_id=5, message_type="query.prepare")
    reply = client_app(msg, ctx)
    P.check_outbound("query.prepare", reply.content)
    leaked = RecordDict({"silo": reply.content["silo"], "rows": ArrayRecord([np.zeros((10, 3))])})
    with pytest.raises(P.ProtocolError):
        P.check_outbound("query.prepare", leaked)
    with pytest.raises(P.ProtocolError):
        P.check_outbound("train", RecordDict({"arrays": ArrayRecord([np.zeros(3)]),
                                              "metrics": MetricRecord({"num-examples": 3, "rows": 1})}))


def test_distpab_phases_as_messages_and_bytes_per_silo():
    cfg = _cfg(protection="distpab", rounds=1)
    doc, grid = _run(cfg)
    _assert_only_weights_counts_stats(grid, cfg, doc)
    d = doc["feature_space"]["n_features"]
    assert d == 6                                               # Adult's numeric columns
    prep = [r for t, r in grid.replies if t == "query.prepare"]
    for r in prep:
        st = r.content["distpab-stats"]
        assert tuple(st["comoment"].numpy().shape) == (d, d) and tuple(st["mean"].numpy().shape) == (d,)
    enc_sent = [m for m in grid.sent if m.metadata.message_type == "query.encode"]
    assert all(tuple(m.content["distpab-params"]["H"].numpy().shape) == (d + 1, d + 1) for m in enc_sent)
    s0 = doc["bytes"]["setup_per_silo"][0]
    assert s0["distpab_up"] >= 8 * (1 + d + d * d) and s0["distpab_down"] >= 8 * ((d + 1) ** 2 + 2 * d)
    assert doc["distpab"]["features"] == doc["feature_space"]["columns"]


def test_seeded_runs_are_reproducible():
    cfg = _cfg(protection="raw", model="lr")
    d1, _ = _run(cfg)
    d2, _ = _run(cfg)
    assert d1["rounds"] == d2["rounds"]
    d3, _ = _run(dict(cfg, seed=4))
    assert d3["rounds"] != d1["rounds"]


def test_every_model_trains_and_scores():
    for model in ("svm", "perceptron", "mlp-distpab"):
        doc, _ = _run(_cfg(model=model, rounds=1))
        assert 0.0 <= doc["final"]["accuracy"] <= 1.0 and np.isfinite(doc["final"]["loss"])


def test_feature_space_comes_from_the_silos_category_sets_not_one_silo():
    cfg = _cfg(protection="raw", rounds=1)
    doc, grid = _run(cfg)
    sets = [json.loads(r.content["categories"]["values"]) for t, r in grid.replies if t == "query.prepare"]
    union = sorted(set().union(*(s["native-country"] for s in sets)))
    assert len(union) > max(len(s["native-country"]) for s in sets)    # no silo alone has every country
    for m in grid.sent:
        if m.metadata.message_type == "query.encode":
            space = json.loads(m.content["space"]["space"])
            assert space["categories"]["native-country"] == union   # every silo gets the union, in one order
            assert "income" not in space["columns"]
    assert doc["feature_space"]["n_features"] == len(P.space_from_json(space_json(grid)).feature_names_)


def space_json(grid):
    return next(m.content["space"]["space"] for m in grid.sent if m.metadata.message_type == "query.encode")


# ---------------------------------------------------------------- Flower's simulation runtime, through the CLI
@pytest.mark.slow
def test_cli_federate_on_flower_simulation(tmp_path):
    rep, page = tmp_path / "r.json", tmp_path / "r.html"
    env = dict(os.environ, RAY_DEDUP_LOGS="0")
    proc = subprocess.run([sys.executable, "-m", "gpuanon", "-q", "federate", "--dataset", "adult", "--rows", "900",
                           "--silos", "2", "--protection", "k=3", "--model", "lr", "--rounds", "2",
                           "--local-epochs", "1", "--report", str(rep), "--html", str(page)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "federated k=3 (2 silos" in proc.stdout
    doc = json.loads(rep.read_text())
    assert doc["runtime"]["name"] == "simulation"
    assert [r["round"] for r in doc["rounds"]] == [1, 2]
    assert doc["config"]["protection"] == "k=3" and len(doc["silos"]) == 2
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html


# ---------------------------------------------------------------- seed 004's test-time mapping (off by default)
def test_test_time_mapping_picks_the_most_specific_legitimate_class():
    import pandas as pd

    from gpuanon.evaluate import FeatureSpace
    from gpuanon.federated.mapping import map_records

    space = FeatureSpace(["age", "job"], {"age": "numeric", "job": "categorical"}, ["age", "job"],
                         {"job": ["a", "b", "c"]})
    ecs = [{"age": [20.0, 40.0], "job": ["a", "b"]}, {"age": [20.0, 30.0], "job": ["a"]},
           {"age": [20.0, 60.0], "job": "*"}]
    test = pd.DataFrame({"age": [25, 35, 50, 70], "job": ["a", "b", "c", "a"]})
    gen, mapped = map_records(test, space, ecs)
    assert mapped.tolist() == [True, True, True, False]
    assert gen["age_min"].tolist()[:3] == [20.0, 20.0, 20.0] and gen["age_max"].tolist()[:3] == [30.0, 40.0, 60.0]
    assert gen["job"].tolist()[:3] == ["a", "a|b", "a|b|c"]
    assert gen["age_min"].iloc[3] == 70 and gen["job"].iloc[3] == "a"      # no class covers age 70: raw


def test_test_time_mapping_is_off_by_default_and_reports_the_patent():
    doc, _ = _run(_cfg(protection="k=5", rounds=1))
    assert "test_mapping" not in doc
    doc, grid = _run(_cfg(protection="k=5", rounds=1, test_mapping=True))
    tm = doc["test_mapping"]
    assert "11,188,791" in tm["patent_note"] and tm["n_classes_shared"] > 0 and 0 <= tm["accuracy"] <= 1
    prep = [r for t, r in grid.replies if t == "query.prepare"]
    assert all("mapping" in r.content for r in prep)       # the classes (>= k rows each), never rows
    with pytest.raises(InputError):
        make_config("adult", protection="raw", test_mapping=True)


# ---------------------------------------------------------------- the comparison grid and its page (in process)
def test_compare_grid_table_and_html(monkeypatch):
    from gpuanon.federated import compare as C
    from gpuanon.federated import run as R
    from gpuanon.federated.report import render_federated_html

    monkeypatch.setattr(R, "run_federated", lambda cfg, **kw: _run(cfg)[0])
    cfg = _cfg(rounds=2, model="lr")
    doc = C.compare(cfg, "raw;k=5", centralized_baseline="raw")
    assert [r["protection"] for r in doc["table"]] == ["raw", "k=5"]
    raw, k5 = doc["table"]
    assert raw["drop_vs_raw"] == 0.0 and k5["drop_vs_raw"] == pytest.approx(raw["fed_accuracy"] - k5["fed_accuracy"])
    assert set(doc["centralized"]) == {"raw"} and doc["centralized"]["raw"]["epochs"] == 2
    assert "central_accuracy" in raw and "central_accuracy" not in k5
    assert "thesis_accuracy" not in raw                     # 1,500 rows is not the thesis's setting
    text = C.format_table(doc["table"])
    assert text.count("\n") == 4 and "| k=5 |" in text
    page = render_federated_html(doc)
    assert page.count("data:image/png;base64,") == 2 and "k=5" in page
    with pytest.raises(InputError):
        C.compare(cfg, "raw", centralized_baseline="sometimes")


# ---------------------------------------------------------------- a model that learned nothing is named
def test_a_model_predicting_one_class_is_warned_in_log_report_and_page(monkeypatch, caplog):
    from gpuanon.federated import compare as C
    from gpuanon.federated import run as R
    from gpuanon.federated.report import render_federated_html

    # the thesis's MLP, one round of one local epoch on 1,050 training rows: one class for every test row
    cfg = _cfg(rounds=1, model="mlp", class_weight="balanced")
    doc, _ = _run(cfg)
    assert doc["final"]["predicted_classes"] == 1
    monkeypatch.setattr(R, "run_simulation", lambda c, **kw: _run(c)[0])
    with caplog.at_level("WARNING", logger="gpuanon"):
        single = R.run_federated(cfg)
    assert any("predicts one class" in r.getMessage() for r in caplog.records)
    assert "--rounds (now 1)" in single["warnings"][0] and "--learning-rate" in single["warnings"][0]
    assert "--class-weight balanced" not in single["warnings"][0]         # already on
    page = render_federated_html(single)
    assert "Warning:" in page and "predicts one class" in page

    monkeypatch.setattr(R, "run_federated", lambda c, **kw: _run(c)[0])
    grid = C.compare(cfg, "raw", centralized_baseline="raw")
    base = grid["centralized"]["raw"]["f1"]
    assert grid["warnings"] == grid["runs"]["raw"]["warnings"]
    assert f"centralized baseline F1 {base:.3f}" in grid["warnings"][0]


def test_an_empty_final_f1_chart_gets_a_note():
    from gpuanon.federated.report import final_bars, scores_note

    table = [{"protection": p, "fed_accuracy": 0.75, "fed_f1": 0.0} for p in ("k=5", "distpab")]
    assert "k=5, distpab" in scores_note(table) and "F1 bars are empty" in scores_note(table)
    assert scores_note([dict(table[0], fed_f1=0.4)]) is None
    assert final_bars(table) != final_bars([dict(r, fed_f1=1e-9) for r in table])   # the chart carries the note


def test_a_model_predicting_both_classes_is_not_warned():
    doc, _ = _run(_cfg(rounds=2, model="lr"))
    assert doc["final"]["predicted_classes"] == 2
    from gpuanon.federated.diagnose import note_one_class
    assert note_one_class("raw", doc) is None and doc["warnings"] == []


def test_balanced_class_weight_is_the_default_and_none_is_the_thesis():
    from gpuanon.federated.models import MODELS, spec_from_dict

    assert _cfg()["model"]["class_weight"] == "balanced"
    thesis = spec_from_dict(_cfg(class_weight="none")["model"])
    assert thesis == MODELS["mlp"]
    with pytest.raises(InputError, match="class weight"):
        _cfg(class_weight="sometimes")
