"""The PyTorch MLP shared by the evaluation and federated learning."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # in the test extra; a plain install may leave it out

from gpuanon.errors import InputError  # noqa: E402
from gpuanon.models.nn import TorchMLPClassifier, build_mlp  # noqa: E402


def _data(n=600, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    y = np.argmax(X[:, :classes] + 0.2 * rng.normal(size=(n, classes)), axis=1)
    return X, np.array(["c0", "c1", "c2"])[y][:, None].ravel() if classes == 3 else y


def test_learns_and_labels_are_kept():
    X, y = _data()
    clf = TorchMLPClassifier(hidden=(32, 16), max_epochs=80, device="cpu", random_state=0).fit(X, y)
    assert clf.classes_.tolist() == ["c0", "c1", "c2"]
    assert (clf.predict(X) == y).mean() > 0.85
    P = clf.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-5)
    assert clf.device_ == "cpu" and clf.n_features_in_ == 6


def test_seeded_runs_are_identical_and_seeds_differ():
    X, y = _data(300)
    a = TorchMLPClassifier(hidden=(16,), max_epochs=5, device="cpu", random_state=4).fit(X, y).predict_proba(X)
    b = TorchMLPClassifier(hidden=(16,), max_epochs=5, device="cpu", random_state=4).fit(X, y).predict_proba(X)
    c = TorchMLPClassifier(hidden=(16,), max_epochs=5, device="cpu", random_state=5).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_early_stopping_restores_the_best_epoch():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 5)).astype(np.float32)
    y = rng.integers(0, 2, 400)  # pure noise: validation loss stops improving quickly
    clf = TorchMLPClassifier(hidden=(64, 64), max_epochs=300, patience=5, device="cpu", random_state=0).fit(X, y)
    assert clf.n_epochs_ < 300
    assert clf.n_epochs_ == clf.best_epoch_ + 5
    assert clf.best_validation_loss_ is not None
    # restored weights give the recorded best validation loss on a re-fit's split: recompute via a fresh run
    no_stop = TorchMLPClassifier(hidden=(8,), max_epochs=7, patience=0, device="cpu").fit(X, y)
    assert no_stop.n_epochs_ == 7 and no_stop.best_validation_loss_ is None


def test_weights_round_trip_for_federated_averaging():
    X, y = _data(200)
    a = TorchMLPClassifier(hidden=(8, 4), max_epochs=3, device="cpu", random_state=0).fit(X, y)
    b = TorchMLPClassifier(hidden=(8, 4), max_epochs=3, device="cpu", random_state=1).fit(X, y)
    avg = [(wa + wb) / 2 for wa, wb in zip(a.get_weights(), b.get_weights())]
    b.set_weights(avg)
    for w, v in zip(b.get_weights(), avg):
        np.testing.assert_allclose(w, v)
    assert [w.shape for w in a.get_weights()] == [(8, 6), (8,), (4, 8), (4,), (3, 4), (3,)]
    with pytest.raises(InputError, match="shape"):
        b.set_weights([np.zeros((1, 1))] + avg[1:])
    with pytest.raises(InputError, match="expected 6 weight arrays"):
        b.set_weights(avg[:2])


def test_build_mlp_layers():
    net = build_mlp(10, 2, hidden=(10, 200, 200))  # the DISTPAB FL configuration
    shapes = [tuple(p.shape) for p in net.parameters()]
    assert shapes == [(10, 10), (10,), (200, 10), (200,), (200, 200), (200,), (2, 200), (2,)]
    with pytest.raises(InputError, match="activation"):
        build_mlp(3, 2, activation="gelu6")


def test_errors_are_clear():
    X, y = _data(50)
    with pytest.raises(InputError, match="two classes"):
        TorchMLPClassifier(device="cpu").fit(X, np.zeros(50))
    with pytest.raises(InputError, match="not fitted"):
        TorchMLPClassifier(device="cpu").predict(X)
    with pytest.raises(InputError, match="rows"):
        TorchMLPClassifier(device="cpu").fit(X, y[:10])
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="no CUDA device"):
            TorchMLPClassifier(device="cuda").fit(X, y)


def test_balanced_class_weights_come_from_the_labels_given():
    import torch

    from gpuanon.models.nn import class_weights

    w = class_weights(torch.tensor([0, 0, 0, 1]), 3)       # n / (classes x count); absent class 2 -> 1
    assert torch.allclose(w, torch.tensor([4 / 9, 4 / 3, 1.0]))


def test_balanced_local_training_uses_the_weighted_loss():
    """train_local with class_weight='balanced' takes the same steps as cross-entropy weighted by the
    silo's own label counts, and other steps than the plain loss."""
    import torch

    from gpuanon.federated.models import build_model, get_weights, model_spec, train_local
    from gpuanon.models.nn import class_weights, train_epochs

    rng = np.random.default_rng(0)
    X = torch.from_numpy(rng.normal(size=(90, 4)).astype(np.float32))
    y = torch.from_numpy((rng.random(90) < 0.2).astype(np.int64))
    spec = model_spec("lr", class_weight="balanced")
    net = build_model(spec, 4, 2, seed=0)
    train_local(net, spec, X, y, 2, seed=1)
    ref = build_model(spec, 4, 2, seed=0)
    opt = torch.optim.SGD(ref.parameters(), lr=spec.learning_rate, foreach=True)
    train_epochs(ref, opt, X, y, 2, spec.batch_size, torch.Generator().manual_seed(1),
                 loss_fn=torch.nn.CrossEntropyLoss(weight=class_weights(y, 2)))
    plain = build_model(spec, 4, 2, seed=0)
    train_local(plain, model_spec("lr"), X, y, 2, seed=1)
    for a, b, c in zip(get_weights(net), get_weights(ref), get_weights(plain)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert any(not np.allclose(a, c) for a, c in zip(get_weights(net), get_weights(plain)))
