"""Method registry: one line per method, `name: "MODULE:RECORD"` (a `Method` in sentune/methods/MODULE.py, or in any
importable module when MODULE has a dot or lives outside the package). The built-in records are in
sentune/methods/records.py, which imports no torch: a method's code loads when it first trains, so importing sentune
and checking a recipe stay fast and free of side effects."""

from __future__ import annotations

import importlib
import importlib.util

from sentune.errors import UserError
from sentune.methods.base import Method

REGISTRY: dict[str, str] = {
    "sg": "records:SG",
    "sg-opt": "records:SG_OPT",
    "bt": "records:BT",
    "bt-sg-opt": "records:BT_SG_OPT",
    "mirror": "records:MIRROR",
    "simcse": "records:SIMCSE",
    "mirror-char": "records:MIRROR_CHAR",
    "flow-joint": "records:FLOW_JOINT",
    "multitask": "records:MULTITASK",
    "ct": "records:CT",
    "st-ct": "records:ST_CT",
    "st-mnrl": "records:ST_MNRL",
    "mnrl-pairs": "records:MNRL_PAIRS",
    "mnrl-hard-negatives": "records:MNRL_HARD_NEGATIVES",
    "margin-mse": "records:MARGIN_MSE",
    "nli": "records:NLI",
    "sts-regression": "records:STS_REGRESSION",
    "sed": "records:SED",
    "tsdae": "records:TSDAE",
    "cosent": "records:COSENT",
    "online-contrastive": "records:ONLINE_CONTRASTIVE",
    "query-side": "query_side:QUERY_SIDE",
}


class UnknownMethodError(UserError):
    pass


def method_names() -> list[str]:
    return sorted(REGISTRY)


def get_method(name: str) -> Method:
    if name not in REGISTRY:
        raise UnknownMethodError(f"method: unknown method {name!r}; choose {', '.join(method_names())}")
    module, record = REGISTRY[name].split(":")
    builtin = f"sentune.methods.{module}"
    method = getattr(importlib.import_module(builtin if importlib.util.find_spec(builtin) else module), record)
    if method.name != name:  # a registry line pointing at the wrong record
        raise RuntimeError(f"registry entry {name!r} points at method {method.name!r}")
    return method
