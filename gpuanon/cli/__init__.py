"""The ``gpuanon`` command.

    gpuanon anonymize --dataset adult --k 10 --out adult_k10.csv --report adult_k10.json
    gpuanon anonymize data.parquet --qi age,zip --sensitive disease --k 5 --l 2 --out anon.parquet
    gpuanon check anon.csv --qi age,zip --sensitive disease --k 5 --l 2
    gpuanon risk anon.csv --qi age,zip --original data.csv --sampling-fraction 0.01 --html risk.html

Errors in the input print one line naming the problem and the fix and exit with status 2;
``check`` exits with status 1 when the table does not meet the requested k / l / t. An interrupt
(Ctrl-C, SIGINT) exits with status 130, SIGTERM (how batch schedulers stop a job) with 143; either way
no output and no temporary file is left.

One module per subcommand, each with ``add_parser(sub)`` and ``run(args)``; option defaults come
from the packaged ``defaults.toml`` and a ``--config`` file (:mod:`gpuanon.cli.config`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import warnings

from . import anonymize, attack, check, evaluate, federate, hierarchy, perturb, risk, sweep
from .. import __version__
from ..cpu import prefer_avx2_sort, refused
from ..errors import GpuanonError
from .anonymize import summary_line
from .common import log, refuse_overwriting_inputs, setup_logging
from .config import load_config
from .options import Parser

__all__ = ["build_parser", "main", "summary_line"]

#: subcommand -> module, in the order ``gpuanon --help`` lists them
COMMANDS = {"anonymize": anonymize, "sweep": sweep, "hierarchy": hierarchy, "perturb": perturb, "attack": attack,
            "evaluate": evaluate, "federate": federate, "check": check, "risk": risk}


def build_parser(config: dict | None = None) -> Parser:
    """The whole parser; ``config`` (a ``--config`` file's values) becomes defaults of ``anonymize``."""
    p = Parser(prog="gpuanon", description="GPU-accelerated anonymization of tabular data.")
    p.add_argument("--version", action="version", version=f"gpuanon {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="no log lines or progress")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, module in COMMANDS.items():
        if name == "anonymize":
            module.add_parser(sub, config)
        else:
            module.add_parser(sub)
    return p


def _subparser(parser, name: str):
    """The parser of one subcommand."""
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM, so that it unwinds like Ctrl-C: every temporary output is
    removed on the way out."""


def _on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM does not cut the clean-up short
    raise Terminated()


def main(argv=None) -> int:
    prefer_avx2_sort()  # before NumPy is imported: its AVX2 sorts on AMD Zen 4 (gpuanon.cpu)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(argv)
    except Terminated:  # arrived outside the command (while parsing the options)
        sys.stderr.write("gpuanon: terminated (SIGTERM); nothing was written\n")
        return 143
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    log.warning("%s", " ".join(str(message).split()))


def _main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(getattr(args, "quiet", False))
    if not args.command:
        parser.print_help()
        return 2
    try:
        if getattr(args, "config", None):  # its keys are anonymize's options (less --config and --quiet)
            actions = {a.dest: a for a in _subparser(parser, "anonymize")._actions}
            keys = {k: actions[k] for k in set(vars(args)) - {"command", "config", "quiet"} if k in actions}
            args = build_parser(load_config(args.config, keys)).parse_args(argv)
        refuse_overwriting_inputs(args)
        with warnings.catch_warnings():  # a warning is one plain log line, not Python's file:line form
            warnings.showwarning = _warning_line
            return COMMANDS[args.command].run(args)
    except GpuanonError as exc:
        sys.stderr.write(f"gpuanon: error: {exc}\n")
        return exc.exit_code
    except Terminated:
        sys.stderr.write("gpuanon: terminated (SIGTERM); nothing was written\n")
        return 143
    except KeyboardInterrupt:
        sys.stderr.write("gpuanon: interrupted\n")
        return 130
    except RuntimeError as exc:  # NumPy refusing the CPU features the command or the user chose (gpuanon.cpu)
        line = refused(exc)
        if line is None:
            raise
        sys.stderr.write(f"gpuanon: error: {line}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
