"""The papers each built-in method implements, as BibTeX (or a line where there is none): a method's record
(sentune.methods.records) and its code (sentune/methods/MODULE.py) both cite them; kept apart so the records stay one
screenful per method."""

MIRROR_CITATION = """@inproceedings{liu-etal-2021-fast,
  title = {Fast, Effective, and Self-Supervised: Transforming Masked Language Models into Universal Lexical and Sentence Encoders},
  author = {Liu, Fangyu and Vuli{\\'c}, Ivan and Korhonen, Anna and Collier, Nigel},
  booktitle = {Proceedings of EMNLP 2021},
  year = {2021}
}
@inproceedings{gao-etal-2021-simcse,
  title = {{SimCSE}: Simple Contrastive Learning of Sentence Embeddings},
  author = {Gao, Tianyu and Yao, Xingcheng and Chen, Danqi},
  booktitle = {Proceedings of EMNLP 2021},
  year = {2021}
}"""


SG_CITATION = """@inproceedings{kim-etal-2021-self,
  title = {Self-Guided Contrastive Learning for {BERT} Sentence Representations},
  author = {Kim, Taeuk and Yoo, Kang Min and Lee, Sang-goo},
  booktitle = {Proceedings of ACL-IJCNLP 2021},
  year = {2021}
}"""


CT_CITATION = """@inproceedings{carlsson2021semantic,
  title = {Semantic Re-tuning with Contrastive Tension},
  author = {Carlsson, Fredrik and Gyllensten, Amaru Cuba and Gogoulou, Evangelia and Hellqvist, Erik Ylip{\\"a}{\\"a} and Sahlgren, Magnus},
  booktitle = {International Conference on Learning Representations},
  year = {2021}
}"""


MULTITASK_CITATION = """@misc{hu-bert-cf,
  title = {{BERT-CF}: Contrastive Flows for MultiTask-{BERT}},
  author = {Hu, George},
  note = {Stanford CS224N Default Project}
}"""


NLI_CITATION = """@inproceedings{reimers-gurevych-2019-sentence,
  title = {Sentence-{BERT}: Sentence Embeddings using Siamese {BERT}-Networks},
  author = {Reimers, Nils and Gurevych, Iryna},
  booktitle = {Proceedings of EMNLP-IJCNLP 2019},
  year = {2019}
}"""


SED_CITATION = """@article{carlsson2021sed,
  title = {Sentence Embeddings by Ensemble Distillation},
  author = {Carlsson, Fredrik and Sahlgren, Magnus},
  journal = {arXiv preprint arXiv:2104.06719},
  year = {2021}
}"""


TSDAE_CITATION = """@inproceedings{wang-2021-tsdae,
  title = {{TSDAE}: Using Transformer-based Sequential Denoising Auto-Encoder for Unsupervised Sentence Embedding Learning},
  author = {Wang, Kexin and Reimers, Nils and Gurevych, Iryna},
  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2021},
  year = {2021}
}"""


LABELLED_CITATION = 'Su, "CoSENT: A more efficient sentence vector scheme than Sentence-BERT", 2022'


BERT_CF_CITATION = (
    MIRROR_CITATION
    + """
@inproceedings{li-etal-2020-sentence,
  title = {On the Sentence Embeddings from Pre-trained Language Models},
  author = {Li, Bohan and Zhou, Hao and He, Junxian and Wang, Mingxuan and Yang, Yiming and Li, Lei},
  booktitle = {Proceedings of EMNLP 2020},
  year = {2020}
}"""
)
