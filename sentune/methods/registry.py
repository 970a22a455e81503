"""Method registry: one line per method, `name: "module:RECORD"` (a `Method` in sentune/methods/MODULE.py,
or in any importable module when MODULE has a dot or lives outside the package). Only the method asked for
is imported, so importing sentune stays fast and free of side effects."""

from __future__ import annotations

import importlib
import importlib.util

from sentune.errors import UserError
from sentune.methods.base import Method

REGISTRY: dict[str, str] = {
    "sg": "sg:SG",
    "sg-opt": "sg:SG_OPT",
    "bt": "bt:BT",
    "bt-sg-opt": "bt:BT_SG_OPT",
    "mirror": "mirror:MIRROR",
    "simcse": "mirror:SIMCSE",
    "mirror-char": "mirror:MIRROR_CHAR",
    "flow-joint": "bert_cf:FLOW_JOINT",
    "multitask": "multitask:MULTITASK",
    "ct": "ct:CT",
    "st-ct": "ct:ST_CT",
    "st-mnrl": "mnrl:ST_MNRL",
    "mnrl-pairs": "mnrl:MNRL_PAIRS",
    "mnrl-hard-negatives": "mnrl:MNRL_HARD_NEGATIVES",
    "nli": "nli:NLI",
    "sts-regression": "sts_regression:STS_REGRESSION",
    "sed": "sed:SED",
    "tsdae": "tsdae:TSDAE",
    "cosent": "labelled:COSENT",
    "online-contrastive": "labelled:ONLINE_CONTRASTIVE",
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
