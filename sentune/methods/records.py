"""Every built-in method's record (sentune.methods.base.Method): its parameters, the data and poolings it trains on,
its defaults and citation, and where its code is. The code (losses, data views, finalisers) lives in
sentune/methods/MODULE.py and imports torch; a record names it as `deferred("sentune.methods.MODULE:function")`, which
imports it on the first call. So a recipe is checked against its method's record (sentune.training.recipe.validate_recipe)
in a fraction of a second, before torch loads, and the registry (sentune.methods.registry) points here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sentune.core.options import OptionError, option
from sentune.data.kinds import Pairs, ScoredPairs, Tuples
from sentune.methods.base import Method, deferred
from sentune.methods.citations import (
    BERT_CF_CITATION,
    CT_CITATION,
    LABELLED_CITATION,
    MIRROR_CITATION,
    MULTITASK_CITATION,
    NLI_CITATION,
    SED_CITATION,
    SG_CITATION,
    TSDAE_CITATION,
)

# mirror: sentune/methods/mirror.py


@dataclass
class MirrorParams:
    temperature: float = option(0.05, "τ of the InfoNCE softmax", minimum=0, exclusive=True)
    span_p: float = option(0.3, "p_g of the Geometric span length", minimum=0, exclusive=True, below=1)
    span_cap: int = option(5, "longest masked span in tokens (0: SimCSE, dropout only)", minimum=0)
    masking: Literal["token", "char"] = option("token", "token spans masked per batch, or 5 characters masked in the text (original code)")
    gather_negatives: bool = option(True, "data parallel: every process's rows are candidates (false: this process's only)")


MIRROR = Method(
    "mirror", deferred("sentune.methods.mirror:build_mirror_loss"), pooling="mean", columns=("sentence",), params=MirrorParams, citation=MIRROR_CITATION
)


SIMCSE = Method(
    "simcse",
    deferred("sentune.methods.mirror:build_mirror_loss"),
    pooling="mean",
    columns=("sentence",),
    params=MirrorParams,
    defaults={"span_cap": 0},
    citation=MIRROR_CITATION,
)


MIRROR_CHAR = Method(
    "mirror-char",
    deferred("sentune.methods.mirror:build_mirror_loss"),
    pooling="mean",
    columns=("sentence", "masked"),
    params=MirrorParams,
    defaults={"masking": "char"},
    data_view=deferred("sentune.methods.mirror:char_masked_rows"),
    citation=MIRROR_CITATION,
)


# sg: sentune/methods/sg.py


@dataclass
class SGParams:
    objective: Literal["base", "opt1", "opt2", "opt3"] = option("opt3", "L^base (SG) or L^opt1/2/3 (SG-OPT)")
    temperature: float = option(0.01, "τ of φ", minimum=0, exclusive=True)
    reg_weight: float = option(0.1, "λ of L^reg = λ‖BERT_F − BERT_T‖²", minimum=0)
    view_pooling: Literal["max", "mean", "cls"] = option("max", "token pooling of BERT_F's hidden states (the views)")
    layers: list[int] | None = option(None, "hidden states used as views (null: every one, 0..l)")
    head_hidden: int | None = option(4096, "width of the projection head f (null: no head)", minimum=1)
    cached_views: bool = option(True, "compute BERT_F's views once for the training set instead of every step")
    gather_negatives: bool = option(True, "data parallel: every process's rows are negatives (false: this process's only)")

    def loss_settings(self) -> dict:
        return {k: v for k, v in vars(self).items() if k != "cached_views"}


SG = Method(
    "sg",
    deferred("sentune.methods.sg:build_sg_loss"),
    pooling="cls",
    columns=("sentence", "label"),
    params=SGParams,
    defaults={"objective": "base"},
    citation=SG_CITATION,
)


SG_OPT = Method("sg-opt", deferred("sentune.methods.sg:build_sg_loss"), pooling="cls", columns=("sentence", "label"), params=SGParams, citation=SG_CITATION)


# bt: sentune/methods/bt.py


@dataclass
class BTParams(SGParams):
    cached_views: bool = option(False, "unused: BT's positives go through BERT_T every step")


BT = Method(
    "bt",
    deferred("sentune.methods.bt:build_bt_loss"),
    pooling="cls",
    columns=("sentence", "paraphrase"),
    params=BTParams,
    defaults={"objective": "base"},
    takes=(Pairs,),
    citation=SG_CITATION,
)


BT_SG_OPT = Method(
    "bt-sg-opt",
    deferred("sentune.methods.sg:build_sg_loss"),
    pooling="cls",
    columns=("sentence", "paraphrase", "label"),
    params=SGParams,
    takes=(Pairs,),
    citation=SG_CITATION,
)


# ct: sentune/methods/ct.py


CT = Method(
    "ct",
    deferred("sentune.methods.ct:build_ct_loss"),
    pooling="mean",
    columns=("sentence_a", "sentence_b", "label"),
    data_view=deferred("sentune.methods.ct:ct_view"),
    finalize=deferred("sentune.methods.ct:keep_better_tower"),
    ordered_batches=True,
    citation=CT_CITATION,
)


ST_CT = Method(
    "st-ct",
    deferred("sentune.methods.ct:build_st_ct_loss"),
    pooling="mean",
    columns=("sentence_a", "sentence_b", "label"),
    data_view=deferred("sentune.methods.ct:ct_view"),
    ordered_batches=True,
    citation=CT_CITATION,
)


# mnrl: sentune/methods/mnrl.py


@dataclass
class MNRLParams:
    scale: float = option(20.0, "1/τ of the library's loss", minimum=0, exclusive=True)
    gather_negatives: bool = option(True, "data parallel: every process's positives are negatives (the library's gather_across_devices)")


ST_MNRL = Method(
    "st-mnrl",
    deferred("sentune.methods.mnrl:build_mnrl_loss"),
    pooling="mean",
    columns=("sentence", "positive"),
    params=MNRLParams,
    data_view=deferred("sentune.methods.mnrl:pair_view"),
)


MNRL_PAIRS = Method(
    "mnrl-pairs",
    deferred("sentune.methods.mnrl:build_mnrl_loss"),
    pooling="mean",
    columns=("sentence", "positive"),
    params=MNRLParams,
    data_view=deferred("sentune.methods.mnrl:given_pairs_view"),
    takes=(Pairs,),
)


HARD_NEGATIVES = 2  # negatives per row: the best-ranked unjudged document of BM25 and of the dense model


MNRL_HARD_NEGATIVES = Method(
    "mnrl-hard-negatives",
    deferred("sentune.methods.mnrl:build_mnrl_loss"),
    pooling="mean",
    columns=("anchor", "positive", *(f"negative_{i}" for i in range(1, HARD_NEGATIVES + 1))),
    params=MNRLParams,
    data_view=deferred("sentune.methods.mnrl:tuples_view"),
    takes=(Tuples,),
    distinct_batches=True,  # a query's rows of several passes (sentune.adaptation.hard_negatives) never share a batch
)


# margin-mse: sentune/methods/margin_mse.py

MARGIN_MSE = Method(
    "margin-mse",
    deferred("sentune.methods.margin_mse:build_margin_mse_loss"),
    pooling="mean",
    columns=("anchor", "positive", *(f"negative_{i}" for i in range(1, HARD_NEGATIVES + 1)), "label"),
    data_view=deferred("sentune.methods.margin_mse:margin_tuples_view"),
    takes=(Tuples,),
)


# multitask: sentune/methods/multitask.py

QQP_PER_ROW = 3


def multitask_columns() -> tuple[str, ...]:
    return ("sst", *[f"qqp_{side}{k}" for k in range(QQP_PER_ROW) for side in "ab"], "sts_a", "sts_b", "label")


@dataclass
class MultitaskParams:
    h_para: float = option(0.7, "hinge h_para of the paraphrase head")
    h_sem: float = option(0.0, "hinge h_sem of the similarity head")
    weights: tuple[float, ...] = option((5.0, 20.0, 1.0), "weights of L_sent, L_para, L_sem")
    e_para: int = option(768, "output size of W_para", minimum=1)
    e_sem: int = option(768, "output size of W_sem", minimum=1)
    qqp_train: Literal["dev", "test"] = option("dev", "the QQP half trained on (the other is split into dev and test)")
    head_input: Literal["unit", "as-is"] = option(
        "unit", "what the heads read: the L2-normalised sentence embedding (one scale for every encoder) or it as given"
    )

    def __post_init__(self) -> None:
        if len(self.weights) != 3:
            raise OptionError(f"params.weights: expected 3 numbers (sentiment, paraphrase, similarity), got {list(self.weights)}")


MULTITASK = Method(
    "multitask",
    deferred("sentune.methods.multitask:build_multitask_loss"),
    pooling="mean",
    columns=multitask_columns(),
    params=MultitaskParams,
    data_view=deferred("sentune.methods.multitask:multitask_view"),
    evaluator=deferred("sentune.methods.multitask:make_evaluator"),
    citation=MULTITASK_CITATION,
)


# nli: sentune/methods/nli.py


NLI = Method(
    "nli",
    deferred("sentune.methods.nli:build_nli_loss"),
    pooling="mean",
    columns=("premise", "hypothesis", "label"),
    data_view=deferred("sentune.methods.nli:nli_view"),
    citation=NLI_CITATION,
)


# sts_regression: sentune/methods/sts_regression.py


@dataclass
class STSRegressionParams:
    lower_bound: float = option(0.0, "lb: gold [0, 5] maps to [lb, 1] (0 = SBERT's CosineSimilarityLoss)", minimum=0, below=1)


STS_REGRESSION = Method(
    "sts-regression",
    deferred("sentune.methods.sts_regression:build_loss"),
    pooling="mean",
    columns=("sentence_a", "sentence_b", "label"),
    params=STSRegressionParams,
    data_view=deferred("sentune.methods.sts_regression:sts_train_view"),
    citation=NLI_CITATION,
)


# sed: sentune/methods/sed.py


@dataclass
class SEDParams:
    members: list[str] = option(default_factory=list, help="model folders of the ensemble members")
    eval_layers: Literal[1, 2, 3, "dev"] = option(2, "the learner's pooling: mean of its last 1, 2 or 3 layers, or 'dev' to choose on the dev task")

    def __post_init__(self) -> None:
        if not self.members:
            raise OptionError("params.members: SED needs the model folders of the ensemble members (a list)")


SED = Method(
    "sed",
    deferred("sentune.methods.sed:build_sed_loss"),
    pooling="mean",
    columns=("sentence", "label"),
    params=SEDParams,
    finalize=deferred("sentune.methods.sed:learner_pooling"),
    citation=SED_CITATION,
)


# tsdae: sentune/methods/tsdae.py


@dataclass
class TSDAEParams:
    deletion_ratio: float = option(0.6, "probability of deleting each word of the input (the paper's best: 0.6)", minimum=0, below=1)
    decoder: str | None = option(
        None, "a model (hub id or path) to decode with, untied: for an encoder transformers cannot run as a causal LM (null: the encoder's own, tied)"
    )


TSDAE = Method(
    "tsdae",
    deferred("sentune.methods.tsdae:build_tsdae_loss"),
    pooling="cls",
    columns=("noisy", "sentence"),
    params=TSDAEParams,
    data_view=deferred("sentune.methods.tsdae:damaged_rows"),
    unsupported=deferred("sentune.methods.tsdae:without_decoder"),
    citation=TSDAE_CITATION,
)


# labelled: sentune/methods/labelled.py


@dataclass
class CoSENTParams:
    scale: float = option(20.0, "λ: the scale of the cosine differences (CoSENT's 20)", minimum=0, exclusive=True)


@dataclass
class ContrastiveParams:
    margin: float = option(0.5, "m: how far apart (cosine distance) negative pairs are pushed", minimum=0, exclusive=True)


COSENT = Method(
    "cosent",
    deferred("sentune.methods.labelled:build_cosent"),
    pooling="mean",
    columns=("sentence_a", "sentence_b", "label"),
    params=CoSENTParams,
    data_view=deferred("sentune.methods.labelled:labelled_rows"),
    takes=(ScoredPairs,),
    citation=LABELLED_CITATION,
)


ONLINE_CONTRASTIVE = Method(
    "online-contrastive",
    deferred("sentune.methods.labelled:build_contrastive"),
    pooling="mean",
    columns=("sentence_a", "sentence_b", "label"),
    params=ContrastiveParams,
    data_view=deferred("sentune.methods.labelled:labelled_rows"),
    takes=(ScoredPairs,),
    citation='Hadsell, Chopra & LeCun, "Dimensionality Reduction by Learning an Invariant Mapping", CVPR 2006',
)


# bert_cf: sentune/methods/bert_cf.py


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


FLOW_JOINT = Method(
    "flow-joint",
    deferred("sentune.methods.bert_cf:build_flow_joint_loss"),
    pooling="mean",
    columns=("sentence",),
    params=FlowJointParams,
    finalize=deferred("sentune.methods.bert_cf:compile_live_flow"),
    learning_rates=deferred("sentune.methods.bert_cf:flow_learning_rates"),
    poolings=("mean", "cls", "max", "first-last"),
    citation=BERT_CF_CITATION,
)
