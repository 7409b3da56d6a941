"""Saying when a federated model learned nothing: the global model predicts one class for every test row.

A model that predicts only the majority class scores an accuracy near the majority share and an F1 of 0
on the positive class; the run looks finished and nothing else would say so.

>>> final = {"round": 3, "accuracy": 0.75, "f1": 0.0, "predicted_classes": 1}
>>> text = one_class_warning("k=5", {"final": final, "config": {"rounds": 3, "model": {"class_weight": "none"}}}, 0.47)
>>> "predicts one class" in text and "centralized baseline F1 0.470" in text and "--class-weight balanced" in text
True
>>> one_class_warning("raw", {"final": dict(final, predicted_classes=2), "config": {}}) is None
True
"""

from __future__ import annotations

import logging

log = logging.getLogger("gpuanon")


def predicts_one_class(final: dict | None) -> bool:
    """True when the scored global model gave every test row the same class."""
    return bool(final) and int(final.get("predicted_classes", 2)) <= 1


def one_class_warning(name: str, doc: dict, central_f1: float | None = None) -> str | None:
    """The warning for run ``doc`` (its ``final`` scores and ``config``), or None when it predicts two
    classes or more; ``central_f1``: the centralized baseline's F1, shown beside the run's."""
    final = doc.get("final")
    if not predicts_one_class(final):
        return None
    cfg = doc.get("config") or {}
    cw = (cfg.get("model") or {}).get("class_weight", "none")
    helps = ["more --rounds (now " + str(cfg.get("rounds", "?")) + ")", "a larger --learning-rate"]
    if cw != "balanced":
        helps.append("--class-weight balanced")
    beside = "" if central_f1 is None else f"; centralized baseline F1 {central_f1:.3f}"
    more = "" if central_f1 is not None else " (--compare raw shows the centralized baseline's F1)"
    return (f"federated {name}: the global model predicts one class for every test row (F1 {final['f1']:.3f}, "
            f"accuracy {final['accuracy']:.3f}{beside}): it learned nothing. What helps: {', '.join(helps)}{more}")


def note_one_class(name: str, doc: dict, central_f1: float | None = None, warn: bool = True) -> str | None:
    """Put the warning (if any) in ``doc['warnings']`` and, with ``warn``, in the log; returns it."""
    text = one_class_warning(name, doc, central_f1)
    doc["warnings"] = [w for w in doc.get("warnings", []) if "predicts one class" not in w]
    if text:
        doc["warnings"].append(text)
        if warn:
            log.warning("%s", text)
    return text
