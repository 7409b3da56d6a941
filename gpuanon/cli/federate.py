"""``gpuanon federate``: cross-silo federated learning on Flower over protected silos."""

from __future__ import annotations


from ..errors import InputError
from .common import refuse_reader_options_with_dataset, refuse_rows_with_file, split_list
from .config import defaults
from .options import table_command


def add_parser(sub):
    fd = table_command(sub, "federate", "cross-silo federated learning on Flower over protected silos",
                        "Split the training part into silos; every silo protects its own rows (none, Mondrian "
                        "k / l / t, or DISTPAB) and trains locally; FedAvg (Flower) weighted by silo sizes; the "
                        "global model is scored every round on the raw held-out rows. Only weights, sample counts "
                        "and statistics cross the network.", read_here=False, target_expr=False)
    g = fd.add_argument_group("federation")
    g.add_argument("--silos", type=int, help="number of silos (Flower client nodes; default 3)")
    g.add_argument("--split", choices=["iid", "dirichlet"],
                   help="stratified IID silos (default) or Dirichlet(alpha) label skew")
    g.add_argument("--alpha", type=float, help="Dirichlet concentration (default 0.5)")
    g.add_argument("--protection",
                   help="what each silo applies to its rows: raw, k=3, k=3,l=2, k=3,t=0.2, k=3,optimize, "
                        "distpab[,noise=0.3] (default raw)")
    g.add_argument("--compare", metavar="PROTECTIONS",
                   help="';'-separated protections, e.g. \"raw;k=3;k=10;k=3,l=2;distpab\": one federated run each "
                        "plus the centralized baseline, one printed table")
    g.add_argument("--centralized", choices=["raw", "all", "none"],
                   help="with --compare: the centralized baseline, the same model trained on the whole raw "
                        "training part (raw, default), on every protection applied centrally (all), or none")
    g.add_argument("--model", choices=["mlp", "mlp-distpab", "lr", "svm", "perceptron"],
                   help="mlp: the thesis's (3 hidden layers, SGD 0.01, batch 32); mlp-distpab: the DISTPAB "
                        "paper's ((10, 200, 200), SGD 1e-4, momentum 0.5, batch 64); lr; svm (linear, hinge); "
                        "perceptron (default mlp)")
    g.add_argument("--rounds", type=int, help="FedAvg rounds R (default 20)")
    g.add_argument("--local-epochs", dest="local_epochs", type=int, help="local epochs E (default 3)")
    g.add_argument("--learning-rate", dest="learning_rate", type=float, help="override the model's learning rate")
    g.add_argument("--class-weight", dest="class_weight", choices=["balanced", "none"],
                   help="balanced: the loss weighs each class by n / (classes x count) of the silo's own labels, so "
                        "a small imbalanced table learns the minority class; none: the thesis's plain loss "
                        "(default balanced)")
    g.add_argument("--batch-size", dest="batch_size", type=int, help="override the model's batch size")
    g.add_argument("--test-size", dest="test_size", type=float, help="held-out share (default 0.3)")
    g.add_argument("--random-state", dest="random_state", type=int,
                   help="seed of the split, the silos, the initial weights and the batch order (default 0)")
    g.add_argument("--positive", help="positive class of a binary target (default: the minority class)")
    g.add_argument("--max-suppression", dest="max_suppression", type=float)
    g.add_argument("--runtime", choices=["simulation", "deployment"],
                   help="Flower's simulation (virtual nodes, Ray) or deployment runtime (a SuperLink and one "
                        "SuperNode per silo as separate processes on loopback) (default simulation)")
    g.add_argument("--gpus-per-client", dest="gpus_per_client", type=float,
                   help="simulation: GPU share of each virtual client, e.g. 0.25 (clients train on CUDA)")
    g.add_argument("--device", choices=["cpu", "cuda", "auto"],
                   help="where the silos train (default cpu; cuda with --gpus-per-client)")
    g.add_argument("--test-mapping", dest="test_mapping", action="store_true",
                   help="seed 004's test-time mapping: silos share their equivalence classes and each test "
                        "record is mapped to the most specific covering class with the smallest NCP before "
                        "scoring (off by default; IBM holds US patent 11,188,791 on this protocol)")
    g.add_argument("--report", help="JSON report (rounds, final, configuration, silos, bytes, seconds)")
    g.add_argument("--html", help="self-contained HTML page: learning curves, final scores beside the centralized")
    fd.set_defaults(**defaults("federate"))
    return fd


def run(args) -> int:
    from ..federated.run import make_config  # noqa: PLC0415
    from .common import command_outputs  # noqa: PLC0415

    outputs = command_outputs(args, [("--report", args.report, False), ("--html", args.html, False)])
    if args.input and args.dataset:
        raise InputError("give either an input file or --dataset, not both")
    refuse_rows_with_file(args)
    refuse_reader_options_with_dataset(args)
    device = args.device or ("cuda" if args.gpus_per_client else "cpu")
    cfg = make_config(args.dataset, args.input, target=args.target, qi=split_list(args.qi), sensitive=args.sensitive,
                      identifiers=split_list(args.identifiers), numeric=split_list(args.numeric),
                      categorical=split_list(args.categorical), rows=args.rows, silos=args.silos, split=args.split,
                      alpha=args.alpha, protection=args.protection, model=args.model, rounds=args.rounds,
                      local_epochs=args.local_epochs, learning_rate=args.learning_rate, batch_size=args.batch_size,
                      test_size=args.test_size, seed=args.random_state, device=device,
                      max_suppression=args.max_suppression, positive=args.positive, test_mapping=args.test_mapping,
                      class_weight=args.class_weight, sep=args.sep, na_values=split_list(args.na_values),
                      dates=split_list(args.dates))
    if args.compare is not None:  # an empty list is refused, not read as no --compare
        from ..federated.compare import compare, format_table  # noqa: PLC0415

        doc = compare(cfg, args.compare, runtime=args.runtime, gpus_per_client=args.gpus_per_client,
                      centralized_baseline=args.centralized)
        text = format_table(doc["table"])
    else:
        from ..federated.run import run_federated  # noqa: PLC0415

        doc = run_federated(cfg, runtime=args.runtime, gpus_per_client=args.gpus_per_client)
        f = doc["final"]
        text = (f"federated {cfg['protection']} ({cfg['silos']} silos, {cfg['split']}, {cfg['model']['name']}, "
                f"{cfg['rounds']} rounds x {cfg['local_epochs']} epochs): accuracy {f['accuracy']:.4f}  precision "
                f"{f['precision']:.4f}  recall {f['recall']:.4f}  F1 {f['f1']:.4f}  ({doc['seconds']:.1f} s)\n")
    with outputs.writing() as w:  # the report and the page, or neither
        if args.report:
            w.json("--report", doc)
        if args.html:
            from ..federated.report import render_federated_html  # noqa: PLC0415

            w.text("--html", render_federated_html(doc))
    print(text, end="")
    return 0
