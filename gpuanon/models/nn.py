"""One PyTorch multi-layer perceptron for every backend (the evaluation's MLP, federated clients).

:func:`build_mlp` makes the network, :func:`train_epochs` runs mini-batch epochs over tensors
already on the device (one index permutation per epoch, no Python loop over rows), and
:class:`TorchMLPClassifier` wraps both with the scikit-learn interface: ``fit`` with early
stopping on a stratified validation split, ``predict_proba``, ``predict``, and
``get_weights`` / ``set_weights`` (flat lists of arrays) for federated averaging.

The same code runs on CUDA (``device="cuda"``, or ``None`` with a usable GPU backend) and on the
CPU; with a fixed ``random_state`` a CPU run is reproducible bit for bit.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(400, 4)).astype(np.float32)
>>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
>>> clf = TorchMLPClassifier(hidden=(16,), max_epochs=60, random_state=0, device="cpu").fit(X, y)
>>> bool((clf.predict(X) == y).mean() > 0.9)
True
>>> clf.predict_proba(X[:2]).shape
(2, 2)
"""

from __future__ import annotations

import copy
import logging
from typing import Sequence

import numpy as np

from ..backend import get_backend
from ..errors import InputError

log = logging.getLogger("gpuanon")

_INSTALL_HINT = ("the MLP needs PyTorch: pip install 'torch==2.13.0' (CPU) or a CUDA build of torch "
                 "on a GPU machine")


def load_torch():
    """The ``torch`` module, or an :class:`InputError` that says how to install it."""
    try:
        import torch  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - torch is in the test extra
        raise InputError(_INSTALL_HINT) from exc
    return torch


def resolve_device(device: str | None = None) -> str:
    """``'cuda'`` when asked for, or when ``None`` and the project's backend is a usable GPU; else ``'cpu'``."""
    torch = load_torch()
    if device is not None:
        if str(device).startswith("cuda") and not torch.cuda.is_available():
            raise InputError(f"device '{device}' was asked for but this PyTorch build sees no CUDA device; "
                             "use device='cpu' or install a CUDA build of torch")
        return str(device)

    if get_backend(None, quiet=True).is_gpu and torch.cuda.is_available():
        return "cuda"
    return "cpu"


def build_mlp(n_in: int, n_out: int, hidden: Sequence[int] = (128, 64, 32), activation: str = "relu",
              dropout: float = 0.0):
    """A feed-forward network ``n_in -> hidden... -> n_out`` (logits; softmax is in the loss)."""
    torch = load_torch()
    acts = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}
    if activation not in acts:
        raise InputError(f"activation '{activation}' is not one of {', '.join(acts)}")
    layers, width = [], int(n_in)
    for h in hidden:
        layers += [torch.nn.Linear(width, int(h)), acts[activation]()]
        if dropout:
            layers.append(torch.nn.Dropout(float(dropout)))
        width = int(h)
    layers.append(torch.nn.Linear(width, int(n_out)))
    return torch.nn.Sequential(*layers)


def make_optimizer(model, name: str = "adam", learning_rate: float = 1e-3, momentum: float = 0.0,
                   weight_decay: float = 0.0):
    torch = load_torch()
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=momentum, weight_decay=weight_decay)
    raise InputError(f"optimizer '{name}' is not one of adam, sgd")


def load_weights(net, weights: Sequence[np.ndarray]):
    """Load host arrays into ``net``'s parameters, in its order (shapes checked); returns ``net``."""
    torch = load_torch()
    state = net.state_dict()
    if len(weights) != len(state):
        raise InputError(f"expected {len(state)} weight arrays, got {len(weights)}")
    new = {}
    for (name, ref), w in zip(state.items(), weights):
        if tuple(np.shape(w)) != tuple(ref.shape):
            raise InputError(f"weight '{name}' has shape {tuple(np.shape(w))}, expected {tuple(ref.shape)}")
        new[name] = torch.as_tensor(np.asarray(w), dtype=ref.dtype, device=ref.device)
    net.load_state_dict(new)
    return net


def class_weights(y, n_classes: int):
    """Balanced class weights ``n / (classes * count_c)`` from the label tensor ``y`` (one bincount on its
    device; scikit-learn's ``class_weight='balanced'``). A class absent from ``y`` gets weight 1 (it adds
    nothing to the loss of these rows anyway)."""
    torch = load_torch()
    counts = torch.bincount(y, minlength=int(n_classes)).to(torch.float32)
    w = counts.sum() / (int(n_classes) * counts.clamp(min=1.0))
    return torch.where(counts > 0, w, torch.ones_like(w))


def train_epochs(model, optimizer, X, y, epochs: int, batch_size: int, generator, loss_fn=None) -> float:
    """``epochs`` passes of mini-batch training over device tensors; returns the last epoch's mean loss.

    ``loss_fn`` defaults to cross-entropy (the federated linear SVM and perceptron pass a margin loss).
    """
    torch = load_torch()
    loss_fn = torch.nn.CrossEntropyLoss() if loss_fn is None else loss_fn
    n = int(X.shape[0])
    model.train()
    last = float("nan")
    for _ in range(int(epochs)):  # a loop over epochs and batches; each batch is one tensor op chain
        perm = torch.randperm(n, generator=generator).to(X.device)
        total = torch.zeros((), device=X.device)
        for s in range(0, n, batch_size):
            idx = perm[s:s + batch_size]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(X[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += loss.detach() * idx.shape[0]
        last = float(total) / max(n, 1)
    return last


def _eval_loss(model, X, y) -> float:
    torch = load_torch()
    model.eval()
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(model(X), y))


class TorchMLPClassifier:
    """Multi-layer perceptron classifier in PyTorch with early stopping.

    Parameters
    ----------
    hidden : sequence of int, default (128, 64, 32)
        Widths of the hidden layers (three, as in the thesis's federated setup).
    activation : {'relu', 'tanh'}
    optimizer : {'adam', 'sgd'}; learning_rate, momentum, weight_decay : its settings
    batch_size : int, default 256
    max_epochs : int, default 200
    patience : int, default 10
        Stop when the validation loss has not improved for this many epochs; the best weights
        are restored. ``0`` turns early stopping off (all ``max_epochs`` on every row).
    validation_fraction : float, default 0.1
        Held-out share of the training rows (stratified) for early stopping.
    device : str or None
        ``'cpu'``, ``'cuda'``, or ``None`` (:func:`resolve_device`).
    random_state : int, default 0
        Seeds the initial weights, the validation split and the batch order.

    Attributes
    ----------
    classes_, n_features_in_, n_epochs_ (epochs run), best_epoch_, best_validation_loss_,
    device_, model_ (the ``torch.nn.Sequential``).
    """

    def __init__(self, hidden: Sequence[int] = (128, 64, 32), activation: str = "relu",
                 optimizer: str = "adam", learning_rate: float = 1e-3, momentum: float = 0.0,
                 weight_decay: float = 0.0, batch_size: int = 256, max_epochs: int = 200, patience: int = 10,
                 validation_fraction: float = 0.1, device: str | None = None, random_state: int = 0):
        self.hidden, self.activation = tuple(hidden), activation
        self.optimizer, self.learning_rate, self.momentum = optimizer, learning_rate, momentum
        self.weight_decay, self.batch_size, self.max_epochs = weight_decay, batch_size, max_epochs
        self.patience, self.validation_fraction = patience, validation_fraction
        self.device, self.random_state = device, random_state

    # ------------------------------------------------------------------ helpers
    def _tensor(self, X):
        torch = load_torch()
        arr = np.ascontiguousarray(np.asarray(X, dtype=np.float32))
        if arr.ndim != 2:
            raise InputError(f"the MLP expects a 2-D (rows x features) array, got {arr.ndim}-D")
        return torch.from_numpy(arr).to(self.device_)

    def _init(self, n_features: int, n_classes: int):
        torch = load_torch()
        self.device_ = resolve_device(self.device)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.random_state))
            self.model_ = build_mlp(n_features, n_classes, self.hidden, self.activation).to(self.device_)
        self.n_features_in_ = int(n_features)

    # ------------------------------------------------------------------ API
    def fit(self, X, y):
        torch = load_torch()
        y = np.asarray(y)
        self.classes_, yc = np.unique(y, return_inverse=True)
        if self.classes_.shape[0] < 2:
            raise InputError(f"the MLP needs at least two classes in y, got {self.classes_.tolist()}")
        X = np.asarray(X, dtype=np.float32)
        if X.shape[0] != yc.shape[0]:
            raise InputError(f"X has {X.shape[0]} rows but y has {yc.shape[0]}")
        self._init(X.shape[1], self.classes_.shape[0])
        rng = np.random.default_rng(self.random_state)
        val = np.zeros(X.shape[0], dtype=bool)
        if self.patience and self.validation_fraction > 0:
            # stratified hold-out: a share of every class, drawn with one permutation
            order = rng.permutation(X.shape[0])
            cls_sorted = order[np.argsort(yc[order], kind="stable")]
            counts = np.bincount(yc, minlength=self.classes_.shape[0])
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            rank = np.arange(X.shape[0]) - np.repeat(starts, counts)
            take = np.repeat(np.floor(counts * self.validation_fraction).astype(np.int64), counts)
            val[cls_sorted[rank < take]] = True
        Xt, yt = self._tensor(X[~val]), torch.from_numpy(yc[~val].astype(np.int64)).to(self.device_)
        Xv, yv = (self._tensor(X[val]), torch.from_numpy(yc[val].astype(np.int64)).to(self.device_)) if val.any() \
            else (None, None)
        opt = make_optimizer(self.model_, self.optimizer, self.learning_rate, self.momentum, self.weight_decay)
        gen = torch.Generator().manual_seed(int(self.random_state))
        best, best_state, best_epoch, since = np.inf, None, 0, 0
        epoch = 0
        for epoch in range(1, int(self.max_epochs) + 1):
            train_epochs(self.model_, opt, Xt, yt, 1, int(self.batch_size), gen)
            if Xv is None:
                continue
            vl = _eval_loss(self.model_, Xv, yv)
            if vl < best - 1e-6:
                best, best_epoch, since = vl, epoch, 0
                best_state = copy.deepcopy(self.model_.state_dict())
            else:
                since += 1
                if since >= self.patience:
                    break
        if best_state is not None:
            self.model_.load_state_dict(best_state)
        self.n_epochs_, self.best_epoch_ = epoch, best_epoch if best_state is not None else epoch
        self.best_validation_loss_ = None if best_state is None else float(best)
        return self

    def predict_proba(self, X) -> np.ndarray:
        torch = load_torch()
        if not hasattr(self, "model_"):
            raise InputError("the MLP is not fitted; call fit first")
        self.model_.eval()
        Xt = self._tensor(X)
        outs = []
        with torch.no_grad():
            for s in range(0, int(Xt.shape[0]), 1 << 16):  # bounded memory on very large inputs
                outs.append(torch.softmax(self.model_(Xt[s:s + (1 << 16)]), dim=1).cpu().numpy())
        return np.concatenate(outs) if outs else np.zeros((0, len(self.classes_)), dtype=np.float32)

    def predict(self, X) -> np.ndarray:
        P = self.predict_proba(X)
        return self.classes_[np.argmax(P, axis=1)]

    def get_weights(self) -> list[np.ndarray]:
        """The parameters as host arrays, in the network's order (for federated averaging)."""
        return [p.detach().cpu().numpy().copy() for p in self.model_.state_dict().values()]

    def set_weights(self, weights: Sequence[np.ndarray]) -> "TorchMLPClassifier":
        load_weights(self.model_, weights)
        return self
