"""BERT-CF, stage 2: a flow fitted jointly with a contrastive regulariser (seed 002 §4.2).

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

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from sentune.core.device import full_precision
from sentune.core.options import option
from sentune.methods.base import Columns, Method, TrainContext
from sentune.methods.mirror import CITATION as MIRROR_CITATION
from sentune.methods.mirror import MirrorLoss, mirror_infonce
from sentune.modules.live_flow import LiveFlow

CITATION = (
    MIRROR_CITATION
    + """
@inproceedings{li-etal-2020-sentence,
  title = {On the Sentence Embeddings from Pre-trained Language Models},
  author = {Li, Bohan and Zhou, Hao and He, Junxian and Wang, Mingxuan and Yang, Yiming and Li, Lei},
  booktitle = {Proceedings of EMNLP 2020},
  year = {2020}
}"""
)


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


@dataclass
class FlowJointParams:
    lambda_mirror: float = option(0.3, "λ_mirror, the weight of the contrastive regulariser (0: Mirror-flow ablation)", minimum=0)
    temperature: float = option(0.05, "τ of L_mirror", minimum=0, exclusive=True)
    span_p: float = option(0.3, "p_g of the masked span length", minimum=0, exclusive=True, below=1)
    span_cap: int = option(5, "longest masked span (0: SimCSE-joint ablation)", minimum=0)
    freeze_encoder: bool = option(True, "train only the flow (false: MinBERT-joint ablation)")
    n_blocks: int = option(3, "flow blocks (ActNorm → 1×1 → coupling)", minimum=1)
    hidden: int = option(32, "hidden width of each coupling network", minimum=1)
    permutation: Literal["lu", "reverse"] = option("lu", "the invertible 1×1 (LU-decomposed) or Glow's fixed reversal")
    flow_seed: int = option(0, "seed of the flow's initialisation")
    flow_learning_rate: float = option(0.0, "the flow's own learning rate (0: training.learning_rate, as for the encoder)", minimum=0)


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


FLOW_JOINT = Method(
    "flow-joint",
    build_flow_joint_loss,
    pooling="mean",
    columns=("sentence",),
    params=FlowJointParams,
    finalize=compile_live_flow,
    learning_rates=flow_learning_rates,
    poolings=("mean", "cls", "max", "first-last"),
    citation=CITATION,
)
