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
