"""BERT-CF, stage 2: a flow fitted jointly with a contrastive regulariser (the BERT-CF report §4.2).

After stage 1 (Mirror-BERT, method `mirror`) trains the encoder f, this stage freezes f and learns the
flow g (sentune.postprocess.flow: k blocks of ActNorm → invertible 1×1 → additive coupling) with

  L_joint = λ_mirror · L_mirror(g⁻¹(f(x)), g⁻¹(f'(x'))) + L_flow(f(x)),
  L_flow  = −log p_Z(g⁻¹(f(x))) − log|det ∂g⁻¹(f(x))/∂f(x)|,   λ_mirror = 0.3 (§5.3)

where f' is the second, span-masked, differently dropped-out view (see sentune.methods.mirror). The
flow sits at the end of the model while training (LiveFlow), so STS-B dev model selection sees it; the
saved model carries it compiled into built-in Dense modules. Ablations of §6.1 are parameters:
SimCSE-joint `span_cap: 0`; Mirror-flow `lambda_mirror: 0`; MinBERT-joint `freeze_encoder: false` from the untuned
model ("learn just the flow with contrastive regularization jointly while unfreezing the BERT encoder for the
contrastive update"): the encoder then learns from L_mirror alone (L_flow reads a detached f(x)), and the flow keeps
its own rate, `flow_learning_rate` (§5.3: the flow at 3e-4, Mirror-BERT's encoder at 1e-4).
"""

from __future__ import annotations

import torch
from torch import nn

from sentune.core.device import full_precision
from sentune.methods.base import Columns, TrainContext
from sentune.methods.citations import BERT_CF_CITATION as CITATION
from sentune.methods.mirror import MirrorLoss, mirror_infonce
from sentune.methods.records import FlowJointParams
from sentune.modules.live_flow import LiveFlow


class FlowJointLoss(nn.Module):
    """Inputs: one text column. The model's last module must be a LiveFlow (build_flow_joint_loss adds it)."""

    def __init__(
        self, model, lambda_mirror: float = 0.3, temperature: float = 0.05, span_p: float = 0.3, span_cap: int = 5, freeze_encoder: bool = True
    ) -> None:
        super().__init__()
        if not isinstance(model[-1], LiveFlow):
            raise ValueError("the flow-joint loss needs a model ending in a LiveFlow module")
        self.model, self.lambda_mirror, self.freeze_encoder = model, lambda_mirror, freeze_encoder
        self.views = MirrorLoss(model, temperature=temperature, span_p=span_p, span_cap=span_cap)
        if freeze_encoder:
            for module in list(model)[:-1]:
                for param in module.parameters():
                    param.requires_grad = False

    def _embed(self, features: dict) -> torch.Tensor:
        for module in list(self.model)[:-1]:
            features = module(features)
        return features["sentence_embedding"]

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels=None) -> dict[str, torch.Tensor]:
        flow = self.model[-1].flow
        features = sentence_features[0]
        with torch.set_grad_enabled(not self.freeze_encoder):  # a frozen encoder needs no graph
            anchors = self._embed(dict(features))
            if self.lambda_mirror:
                mirrors = self._embed(self.views.masked_view(features))
        with full_precision(anchors) as (anchors,):  # the flow and its log-determinant in float32
            # outside the no-grad block: the flow always trains; the encoder never learns from L_flow (§6.1)
            out = {"flow_nll": flow.nll(anchors.detach()).mean()}
        if self.lambda_mirror:
            with full_precision(mirrors) as (mirrors,):
                out["mirror"] = self.lambda_mirror * mirror_infonce(flow(anchors)[0], flow(mirrors)[0], self.views.temperature)
        return out

    def get_config_dict(self) -> dict:
        return {"lambda_mirror": self.lambda_mirror, "freeze_encoder": self.freeze_encoder, **self.views.get_config_dict()}

    @property
    def citation(self) -> str:
        return CITATION


def flow_learning_rates(params: FlowJointParams) -> dict[str, float]:
    """The flow's parameters (the LiveFlow module's `flow`, named model.N.flow.* in the loss) at their own rate."""
    return {r"^model\.\d+\.flow\.": params.flow_learning_rate} if params.flow_learning_rate > 0 else {}


def build_flow_joint_loss(model, columns: Columns, ctx: TrainContext) -> FlowJointLoss:
    p: FlowJointParams = ctx.params
    model.append(LiveFlow(model.get_embedding_dimension(), p.n_blocks, p.hidden, p.permutation, p.flow_seed).to(model.device))
    return FlowJointLoss(model, lambda_mirror=p.lambda_mirror, temperature=p.temperature, span_p=p.span_p, span_cap=p.span_cap, freeze_encoder=p.freeze_encoder)


def compile_live_flow(model, loss=None, ctx=None):
    """Replace the trained LiveFlow by the equivalent built-in Dense modules."""
    from sentence_transformers import SentenceTransformer

    from sentune.postprocess.flow import compile_to_dense

    modules = list(model)
    if not modules or not isinstance(modules[-1], LiveFlow):
        return model, None
    return SentenceTransformer(modules=modules[:-1] + compile_to_dense(modules[-1].flow.eval()), device=str(model.device)), None
