"""Where the command's values come from, lowest first: the packaged ``defaults.toml``, a
``--config`` TOML file (``anonymize``), the options typed on the command line.

Both files reach the parser through ``set_defaults``, so every subcommand reads ``args`` alone.

>>> defaults("sweep")["k_values"], defaults("hierarchy", "build")["rho"]
('3-15', 10)
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources

from ..errors import InputError


@cache
def _packaged() -> dict:
    with resources.files(__package__).joinpath("defaults.toml").open("rb") as f:
        return tomllib.load(f)


def defaults(*command: str) -> dict:
    """The packaged defaults of one subcommand (``"hierarchy", "build"`` for a nested one), keyed by dest."""
    table = _packaged()
    for name in command:
        table = table.get(name, {})
    return {key.replace("-", "_"): val for key, val in table.items() if not isinstance(val, dict)}


def load_config(path: str, keys) -> dict:
    """A user's ``--config`` file as parser defaults: the keys are the long option names ('-' or '_');
    a list is joined with commas (``hierarchy``, which repeats, stays a list)."""
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise InputError(f"cannot read config '{path}': no such file; check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"config '{path}' is not valid TOML ({exc}); fix the file") from None
    keys = set(keys)
    cfg = {}
    for key, val in raw.items():
        k = key.replace("-", "_")
        if k not in keys:
            raise InputError(f"config '{path}': unknown key '{key}'; known keys: {', '.join(sorted(keys))}")
        if k == "hierarchy":
            val = [val] if isinstance(val, str) else list(val)
        elif isinstance(val, list):
            val = ",".join(map(str, val))
        cfg[k] = val
    return cfg
