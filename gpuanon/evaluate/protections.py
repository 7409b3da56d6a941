"""Protections of the training part: ``raw``, Mondrian (``k=3,l=2``, ...), ``suppress``, ``distpab``.

A protection is written as text (``'k=3,t=0.2'``, ``'distpab,noise=0.3'``) or as a dict of the
same keys; :func:`parse_protections` reads a ``;``-separated list and refuses repeats.

>>> [p.name for p in parse_protections("raw;k=3,l=2;distpab")]
['raw', 'k=3,l=2', 'distpab']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ..errors import InputError

DEFAULT_PROTECTIONS = "raw;k=3;k=10;k=50;k=3,l=2;k=3,t=0.2;k=3,optimize;distpab"

_MONDRIAN_KEYS = {"k": int, "l": int, "t": float, "c": float, "l_kind": str, "t_distance": str, "mode": str,
                  "optimize": bool, "hierarchies": str, "rho": float, "max_suppression": float}
_DISTPAB_KEYS = {"noise": float, "selection": str, "seed": int}


@dataclass
class Protection:
    """One way of protecting the training part: ``kind`` is raw, mondrian, suppress or distpab."""

    name: str
    kind: str
    params: dict = field(default_factory=dict)


def _value(key: str, text: str, typ):
    if typ is bool:
        if text.lower() in ("", "1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise InputError(f"protection option '{key}={text}' is not true / false")
    try:
        v = typ(text)
    except ValueError:
        raise InputError(f"protection option '{key}={text}' is not a {typ.__name__}; write e.g. "
                         f"{'k=10' if typ is int else 't=0.2'}") from None
    if typ is float and key == "rho" and float(v).is_integer():
        v = int(v)
    return v


def parse_protection(spec: str | dict | Protection) -> Protection:
    """One protection from text (``'raw'``, ``'k=3,l=2'``, ``'k=3,optimize'``, ``'distpab,noise=0.3'``,
    ``'suppress'``) or a dict of the same keys.

    >>> parse_protection("k=3, t=0.2")
    Protection(name='k=3,t=0.2', kind='mondrian', params={'k': 3, 't': 0.2})
    >>> parse_protection("k=3,opt").params
    {'k': 3, 'optimize': True}
    """
    if isinstance(spec, Protection):
        return spec
    if isinstance(spec, dict):
        kind = str(spec.get("kind", "mondrian")).lower()
        opts = ",".join(k if v is True else f"{k}={v}" for k, v in spec.items() if k != "kind" and v is not False)
        return parse_protection(opts if kind == "mondrian" else ",".join(filter(None, [kind, opts])))
    text = str(spec).strip()
    if not text:
        raise InputError("empty protection; write e.g. 'raw', 'k=10', 'k=3,l=2', 'k=3,t=0.2' or 'distpab'")
    parts = [p.strip() for p in text.split(",") if p.strip()]
    head = parts[0].lower()
    if head in ("raw", "none", "original"):
        if len(parts) > 1:
            raise InputError(f"protection '{text}': 'raw' takes no options")
        return Protection("raw", "raw", {})
    if head in ("suppress", "suppress-all"):
        if len(parts) > 1:
            raise InputError(f"protection '{text}': 'suppress' takes no options")
        return Protection("suppress", "suppress", {})
    if head in ("distpab", "pabidot"):
        params = {}
        for p in parts[1:]:
            key, _, val = p.partition("=")
            key = key.strip().lower()
            if key not in _DISTPAB_KEYS:
                raise InputError(f"protection '{text}': unknown DISTPAB option '{key}'; accepted: "
                                 f"{', '.join(_DISTPAB_KEYS)}")
            params[key] = _value(key, val.strip(), _DISTPAB_KEYS[key])
        name = "distpab" + "".join(f",{k}={v}" for k, v in params.items())
        return Protection(name, "distpab", params)
    params: dict[str, Any] = {}
    for p in parts:
        key, eq, val = p.partition("=")
        key = key.strip().lower().replace("-", "_")
        key = {"opt": "optimize", "optimized": "optimize", "h": "hierarchies"}.get(key, key)
        if key not in _MONDRIAN_KEYS:
            raise InputError(f"protection '{text}': unknown option '{key}'; accepted: raw, suppress, distpab, "
                             f"or {', '.join(_MONDRIAN_KEYS)} (e.g. 'k=3,l=2')")
        if not eq and _MONDRIAN_KEYS[key] is not bool:
            raise InputError(f"protection '{text}': '{key}' needs a value, e.g. '{key}=3'")
        params[key] = _value(key, val.strip(), _MONDRIAN_KEYS[key])
    if "k" not in params:
        raise InputError(f"protection '{text}' has no k; every Mondrian protection needs one, e.g. 'k=3,{text}'")
    if params.get("optimize") is False:
        del params["optimize"]
    name = ",".join(k if v is True else f"{k}={v}" for k, v in params.items())
    return Protection(name, "mondrian", params)


def parse_protections(spec: str | Iterable) -> list[Protection]:
    """A list of protections from ``'raw;k=3;k=3,l=2'`` or an iterable of texts / dicts."""
    items = [s for s in str(spec).split(";") if s.strip()] if isinstance(spec, str) else list(spec)
    if not items:
        raise InputError("no protections given; write e.g. 'raw;k=3;k=10'")
    out = [parse_protection(s) for s in items]
    names = [p.name for p in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"protection(s) {', '.join(dup)} given twice")
    return out

