"""The `wise` candidate of `sentune adapt`: the best tuned candidate's transformer weights interpolated with the
unchanged model's, the mix chosen on the dev pairs.

Wortsman et al., "Robust fine-tuning of zero-shot models" (WiSE-FT), CVPR 2022 (their α; `mix` here, α being the
fusion weight of a hybrid search):

  θ(mix) = (1 − mix) · θ_0 + mix · θ_1,   mix ∈ [0, 1]

θ_0 the weights before tuning, θ_1 after. Interpolating in weight space keeps much of what tuning gained while undoing
what it broke; the paper finds points on the path better than both ends. On an encoder that is already sentence-tuned
(sentune's default) every method moves it down at its first dev evaluation on some domains: the path between it and
the tuned model is a finer search of how far to move than any evaluation schedule, and costs one dev pass per mix,
no training.

Only the transformer's weights are mixed; the tuned candidate's other modules (its pooling, SED's learner head) are
kept, so mix 1 is the tuned candidate itself.
"""

from __future__ import annotations

import copy

import torch

MIXES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # 0 and 1 are the two ends, scored already


class NotInterpolable(ValueError):
    """The two models' transformers do not have the same weights to mix (another architecture)."""


def transformer_of(model) -> torch.nn.Module:
    return model[0].model  # sentence-transformers' Transformer module holds the Hugging Face model as .model


def interpolate(base, tuned, mix: float, into=None):
    """A model whose transformer holds (1 − mix)·base + mix·tuned (floating-point tensors; the rest, e.g. position ids, are
    the tuned model's): `into`, a copy of `tuned` made by the caller, overwritten in place, or else a new copy.

    Why `into`: a search over the mix that copied the model for every mix grew the SciFact --low-memory run from 1.2 to 1.7 GB
    resident (each copy's Hugging Face model lingers until a full garbage collection); one copy, rewritten, does not."""
    start, end = transformer_of(base).state_dict(), transformer_of(tuned).state_dict()
    if start.keys() != end.keys() or any(start[k].shape != end[k].shape for k in end):
        different = sorted(set(start) ^ set(end)) or [k for k in end if start[k].shape != end[k].shape]
        raise NotInterpolable(f"the transformers differ ({', '.join(different[:3])}…)")
    model = copy.deepcopy(tuned) if into is None else into
    target = transformer_of(model).state_dict()  # tensors sharing the parameters' storage: written in place
    with torch.no_grad():
        for name, value in end.items():
            if value.is_floating_point():
                torch.lerp(start[name].to(value), value, mix, out=target[name])
            else:
                target[name].copy_(value)
    return model


def best_mix(curve: dict[float, float]) -> float:
    """The mix with the best dev score; on a tie the smaller one (the nearer the unchanged model)."""
    return max(curve, key=lambda a: (curve[a], -a))
