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
    a list is joined with commas (``hierarchy``, which repeats, stays a list).

    ``keys``: the option names, or a dict of name -> argparse action, whose type, choices and
    on / off switches each value is checked against (a bad value names the file and the key)."""
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise InputError(f"cannot read config '{path}': no such file; check the path") from None
    except IsADirectoryError:
        raise InputError(f"cannot read config '{path}': it is a folder; give a TOML file, e.g. --config job.toml"
                         ) from None
    except OSError as exc:
        raise InputError(f"cannot read config '{path}': {exc.strerror or exc}; check the path") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"config '{path}' is not valid TOML ({exc}); fix the file") from None
    keys = keys if isinstance(keys, dict) else set(keys)
    cfg = {}
    for key, val in raw.items():
        k = key.replace("-", "_")
        if k not in keys:
            raise InputError(f"config '{path}': unknown key '{key}'; known keys: {', '.join(sorted(keys))}")
        if k == "hierarchy":
            if not isinstance(val, (str, list)) or not all(isinstance(v, str) for v in ([val] if isinstance(val, str)
                                                                                        else val)):
                raise InputError(f"config '{path}': {key} = {val!r} is not COLUMN=FILE.csv text (or a list of them); "
                                 f"write e.g. {key} = [\"zip=zip.csv\"]")
            val = [val] if isinstance(val, str) else list(val)
        elif isinstance(val, list):
            val = ",".join(map(str, val))
        if isinstance(keys, dict):
            val = _checked(path, key, val, keys[k])
        cfg[k] = val
    return cfg


_KINDS = {int: ("a whole number", "5"), float: ("a number", "0.2")}
_TEXT_EXAMPLES = {"qi": "age,zip", "sensitive": "disease", "target": "income", "identifiers": "name",
                  "numeric": "age", "categorical": "zip", "dates": "admitted", "input": "data.csv", "out": "anon.csv"}


def _checked(path: str, key: str, val, action):
    """``val`` as the option would take it from the command line; InputError naming the file and key."""
    def bad(what: str, example: str):
        raise InputError(f"config '{path}': {key} = {val!r} is not {what}; write e.g. {key} = {example}")

    if action.nargs == 0:  # an on / off switch (--optimize)
        if not isinstance(val, bool):
            bad("true or false", "true")
        return val
    kind = action.type
    if kind in _KINDS:
        try:
            num = kind(val) if isinstance(val, str) else val
        except ValueError:
            num = None
        if isinstance(num, bool) or not isinstance(num, (int, float)) or (kind is int and not float(num).is_integer()):
            bad(*_KINDS[kind])
        val = kind(num)
    elif not isinstance(val, (str, list)):  # a text option (column names, paths): a number is not one
        bad("text", f'"{_TEXT_EXAMPLES.get(key.replace("_", "-"), "...")}"')
    if action.choices is not None and val not in action.choices:
        bad(f"one of {', '.join(map(str, action.choices))}", f'"{next(iter(action.choices))}"')
    return val
