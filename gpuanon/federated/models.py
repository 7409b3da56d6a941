"""The federated models, all in PyTorch: the project's MLP (thesis and DISTPAB configurations),
logistic regression, linear SVM (multi-class hinge) and the perceptron.

Every model is a ``torch.nn.Sequential`` made by :func:`gpuanon.models.nn.build_mlp` (a linear model is
an MLP without hidden layers), so its weights travel as the same ordered list of arrays.

>>> spec = model_spec("mlp")
>>> spec.hidden, spec.optimizer, spec.learning_rate, spec.batch_size
((128, 64, 32), 'sgd', 0.01, 32)
>>> net = build_model(spec, 5, 2, seed=0)
>>> [tuple(w.shape) for w in get_weights(net)][:2]
[(128, 5), (128,)]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Sequence

import numpy as np

from ..errors import InputError
from ..models.nn import class_weights, load_torch, build_mlp, load_weights, make_optimizer, train_epochs


@dataclass(frozen=True)
class ModelSpec:
    """A model and its local optimizer (what every silo and the server agree on)."""

    name: str
    hidden: tuple = ()
    loss: str = "cross_entropy"       # cross_entropy | hinge | perceptron
    optimizer: str = "sgd"
    learning_rate: float = 0.01
    momentum: float = 0.0
    batch_size: int = 32
    class_weight: str = "none"        # none (the thesis) | balanced (weights from the silo's own labels)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["hidden"] = list(self.hidden)
        return d


#: The thesis's configuration (SPEC 10): 3 hidden layers, SGD learning rate 0.01, batch 32 (the widths are
#: the project's MLP's; the thesis does not give them). The DISTPAB paper's (seed 002, 5.4.1): hidden
#: (10, 200, 200), ReLU, softmax, SGD learning rate 1e-4, momentum 0.5, batch 64.
MODELS = {
    "mlp": ModelSpec("mlp", (128, 64, 32), "cross_entropy", "sgd", 0.01, 0.0, 32),
    "mlp-distpab": ModelSpec("mlp-distpab", (10, 200, 200), "cross_entropy", "sgd", 1e-4, 0.5, 64),
    "lr": ModelSpec("lr", (), "cross_entropy", "sgd", 0.01, 0.0, 32),
    "svm": ModelSpec("svm", (), "hinge", "sgd", 0.01, 0.0, 32),
    "perceptron": ModelSpec("perceptron", (), "perceptron", "sgd", 0.01, 0.0, 32),
}
CLASS_WEIGHTS = ("balanced", "none")
MODEL_TITLES = {"mlp": "MLP (thesis)", "mlp-distpab": "MLP (DISTPAB paper)", "lr": "Logistic regression",
                "svm": "Linear SVM (hinge)", "perceptron": "Perceptron"}


def model_spec(name: str, learning_rate: float | None = None, batch_size: int | None = None,
               momentum: float | None = None, class_weight: str | None = None) -> ModelSpec:
    """The named configuration, with optional overrides (``class_weight``: ``'none'`` or ``'balanced'``)."""
    key = str(name).strip().lower()
    if key not in MODELS:
        raise InputError(f"unknown federated model '{name}'; accepted: {', '.join(MODELS)}")
    spec = MODELS[key]
    if learning_rate is not None:
        if not (np.isfinite(learning_rate) and learning_rate > 0):
            raise InputError(f"learning rate must be a positive number, got {learning_rate}")
        spec = replace(spec, learning_rate=float(learning_rate))
    if batch_size is not None:
        if int(batch_size) < 1:
            raise InputError(f"batch size must be at least 1, got {batch_size}")
        spec = replace(spec, batch_size=int(batch_size))
    if momentum is not None:
        spec = replace(spec, momentum=float(momentum))
    if class_weight is not None:
        if str(class_weight).lower() not in CLASS_WEIGHTS:
            raise InputError(f"class weight '{class_weight}' is not one of {', '.join(CLASS_WEIGHTS)}")
        spec = replace(spec, class_weight=str(class_weight).lower())
    return spec


def spec_from_dict(d: dict) -> ModelSpec:
    return ModelSpec(**{**d, "hidden": tuple(int(h) for h in d.get("hidden", ()))})


def build_model(spec: ModelSpec, n_in: int, n_out: int, seed: int = 0, device: str = "cpu"):
    """A fresh network with seeded initial weights (the same seed gives the same weights on every process)."""
    torch = load_torch()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        net = build_mlp(int(n_in), int(n_out), spec.hidden, "relu")
    return net.to(device)


def get_weights(net) -> list[np.ndarray]:
    """The parameters as float32 host arrays, in the network's order."""
    return [p.detach().cpu().numpy().astype(np.float32, copy=True) for p in net.state_dict().values()]


def set_weights(net, weights: Sequence[np.ndarray]):
    """Load host arrays into ``net`` (shapes checked): :func:`gpuanon.models.nn.load_weights`."""
    return load_weights(net, weights)


def _margin_epochs(net, optimizer, X, y, epochs: int, batch_size: int, generator, margin: float,
                   weight=None) -> float:
    """:func:`gpuanon.models.nn.train_epochs` with a multi-class margin loss (hinge: margin 1; perceptron: 0)."""
    loss_fn = load_torch().nn.MultiMarginLoss(margin=float(margin), weight=weight)
    return train_epochs(net, optimizer, X, y, epochs, batch_size, generator, loss_fn=loss_fn)


def train_local(net, spec: ModelSpec, X, y, epochs: int, seed: int) -> float:
    """``epochs`` local epochs of mini-batch SGD on device tensors; a fresh optimizer each round, a seeded
    batch order. With ``spec.class_weight == 'balanced'`` the loss weighs each class by
    :func:`gpuanon.models.nn.class_weights` of these rows' labels (the silo's own; nothing more crosses the
    network). Returns the last epoch's mean training loss."""
    torch = load_torch()
    if spec.optimizer == "sgd":  # one fused (foreach) update of every parameter per step: small nets are
        opt = torch.optim.SGD(net.parameters(), lr=spec.learning_rate, momentum=spec.momentum,  # step-bound
                              foreach=True)
    else:
        opt = make_optimizer(net, spec.optimizer, spec.learning_rate, spec.momentum)
    gen = torch.Generator().manual_seed(int(seed))
    weight = class_weights(y, net[-1].out_features) if spec.class_weight == "balanced" else None
    if spec.loss == "cross_entropy":
        loss_fn = None if weight is None else torch.nn.CrossEntropyLoss(weight=weight)
        return train_epochs(net, opt, X, y, int(epochs), int(spec.batch_size), gen, loss_fn=loss_fn)
    return _margin_epochs(net, opt, X, y, int(epochs), int(spec.batch_size), gen,
                          1.0 if spec.loss == "hinge" else 0.0, weight=weight)


def loss_value(net, spec: ModelSpec, X, y) -> float:
    """The model's training loss on ``(X, y)`` (cross-entropy, hinge or perceptron criterion)."""
    torch = load_torch()
    net.eval()
    with torch.no_grad():
        out = net(X)
        if spec.loss == "cross_entropy":
            return float(torch.nn.functional.cross_entropy(out, y))
        return float(torch.nn.functional.multi_margin_loss(out, y, margin=1.0 if spec.loss == "hinge" else 0.0))


def predict_scores(net, X) -> np.ndarray:
    """Class scores ``(rows x classes)`` on the host: softmax for every model (a margin model's scores
    ranked the same way)."""
    torch = load_torch()
    net.eval()
    with torch.no_grad():
        return torch.softmax(net(X), dim=1).cpu().numpy().astype(np.float64)
