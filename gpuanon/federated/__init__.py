"""Cross-silo federated learning on Flower (SPEC 10; the thesis's chapters 6-7).

Every silo is a Flower client node: it loads, protects (none, Mondrian k-anonymity / l-diversity /
t-closeness, or DISTPAB) and trains on its own rows where they live; only model weights, sample
counts and statistics cross the network as Flower messages. The server side runs FedAvg weighted by
the silos' sizes and scores the global model every round on raw held-out rows.

``gpuanon federate --dataset adult --silos 3 --protection k=3 --model mlp --rounds 20 --local-epochs 3``

Flower (``flwr[simulation]``) is imported by :mod:`.client_app`, :mod:`.server_app` and the runtimes,
not by this package's ``__init__``.
"""

from .protocol import fedavg
from .run import make_config, run_federated
from .splits import split_silos

__all__ = ["split_silos", "fedavg", "run_federated", "make_config", "compare"]


def __getattr__(name):
    # ``compare`` names both the submodule and its function: a top-level import of the function would
    # hide the module (``from gpuanon.federated import compare as C; C.format_table``)
    if name == "compare":
        from .compare import compare  # noqa: PLC0415

        return compare
    raise AttributeError(name)
