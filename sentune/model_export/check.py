"""The export's quality check: each exported graph against the PyTorch model on the user's pairs or a catalog task.

Two numbers per graph: the cosine of every sentence's vector to its PyTorch vector (mean and minimum), and the check's
metric (pairs: Spearman ×100 for graded labels, average precision ×100 for 0/1 labels, as `sentune adapt` scores
them; a task: its headline in `sentune eval`) with its change from PyTorch's. An int8 graph that loses more than
`max_loss` points is refused (sentune.model_export.command).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentune.errors import UserError

if TYPE_CHECKING:
    from sentune.core.runtime import Runtime
    from sentune.data.user_data import ScoredPairs

DEFAULT_MAX_LOSS = 0.5  # metric points (×100) an int8 export may lose against PyTorch


@dataclass
class CheckSet:
    name: str
    metric: str  # what `score` returns, for people
    sentences: list[str]
    score: Callable[[Any, Runtime], float]  # (model, what computes its batches) -> the check's metric
    # vectors of `sentences` -> the metric, for checks scored from the vectors alone (pairs): saves a second encoding
    score_vectors: Callable[[Any], float] | None = None

    @classmethod
    def parse(cls, text: str, data_dir: str | None) -> CheckSet:
        """A pairs file (s1<TAB>s2<TAB>label) when `text` is a file, else a catalog task name."""
        if Path(text).is_file():
            return cls.of_pairs(Path(text))
        from sentune.data.catalog import load_catalog

        if text not in load_catalog():
            raise UserError(f"--check {text}: neither a pairs file nor a task of the catalog (e.g. STS-B-dev, SICK-R, scifact-train)")
        return cls.of_task(text, data_dir)

    @classmethod
    def of_pairs(cls, path: Path) -> CheckSet:
        from sentune.data.user_data import read_scored_pairs

        return cls.of_scored(read_scored_pairs(path), path.name)

    @classmethod
    def of_scored(cls, pairs: ScoredPairs, name: str) -> CheckSet:
        """Scored pairs (sentune.data.kinds.ScoredPairs), scored by the metric their scale chooses."""
        from sentune.core.encode import Encoder
        from sentune.core.metrics import METRICS
        from sentune.tasks.sts import cosine_scores

        sentences = [s for p in pairs.pairs for s in (p.a, p.b)]

        def score_vectors(vectors) -> float:
            return float(METRICS[pairs.metric].score(pairs.gold, cosine_scores(vectors[0::2], vectors[1::2])))

        def score(model, runtime: Runtime) -> float:
            return score_vectors(Encoder(model, "model", show_progress=False, runtime=runtime).encode(sentences))

        return cls(name, pairs.metric.replace("_", " "), sentences, score, score_vectors)

    @classmethod
    def of_task(cls, name: str, data_dir: str | None) -> CheckSet:
        from sentune.data.catalog import load_task, resolve_data_dir, select_tasks
        from sentune.data.readers import sentences_of
        from sentune.tasks.evaluate import evaluate

        directory = resolve_data_dir(data_dir)
        spec = select_tasks(name, option="--check")[0]
        examples = {spec.name: load_task(spec, directory)}
        sentences = list(dict.fromkeys(text for text, _ in sentences_of(examples[spec.name])))

        check = cls(name, "", sentences, lambda model, runtime: 0.0)  # the real score needs `check` to name its metric

        def score(model, runtime: Runtime) -> float:
            result = evaluate(model, [spec], directory, show_progress=False, examples=examples, runtime=runtime)["runs"]["model"]["tasks"][spec.name]
            value, check.metric = headline(result)
            return value

        check.score = score
        return check


def headline(result: dict) -> tuple[float, str]:
    """A task result's headline number and its name (sentune eval's summary reads the same fields)."""
    if "all" in result:
        return float(result["all"]["spearman"]), "Spearman ×100 (all)"
    if "main" in result:
        return float(result[result["main"]]), result["main"]
    if "acc" in result:
        return float(result["acc"]), "accuracy"
    raise UserError(f"this task's results have no headline number ({', '.join(result)})")


@dataclass
class CheckRow:
    backend: str
    file: str | None
    metric: float
    cosine_mean: float = 1.0
    cosine_min: float = 1.0
    change: float = 0.0


@dataclass
class CheckReport:
    check: str
    metric: str
    max_loss: float
    rows: list[CheckRow] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"check": self.check, "metric": self.metric, "max_loss": self.max_loss, "rows": [vars(r) for r in self.rows]}

    def markdown(self) -> str:
        lines = [
            f"Checked on {self.check} ({self.metric}); vectors compared with the PyTorch model's, sentence by sentence.",
            "",
            "| backend | file | cosine to PyTorch, mean | min | metric | change |",
            "|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            lines.append(f"| {r.backend} | {r.file or '(weights)'} | {r.cosine_mean:.5f} | {r.cosine_min:.5f} | {r.metric:.2f} | {r.change:+.2f} |")
        return "\n".join(lines)


def run_check(model, check: CheckSet, graphs: dict[str, Path], folder: Path, max_loss: float) -> CheckReport:
    """PyTorch, then each graph (backend -> file under `folder`), on `check`; each graph runs in a Runtime of its own,
    so the model itself is never changed."""
    from sentune.core.encode import Encoder
    from sentune.core.onnx_runtime import graph_runtime
    from sentune.core.runtime import PYTORCH
    from sentune.tasks.sts import cosine_scores

    reference = Encoder(model, "model", show_progress=False).encode(check.sentences)
    base = check.score_vectors(reference) if check.score_vectors else check.score(model, PYTORCH)
    report = CheckReport(check.name, check.metric, max_loss, [CheckRow("torch", None, base)])
    for backend, path in graphs.items():
        runtime = graph_runtime(path, backend)
        vectors = Encoder(model, "model", show_progress=False, runtime=runtime).encode(check.sentences)
        cosines = cosine_scores(vectors, reference)
        value = check.score_vectors(vectors) if check.score_vectors else check.score(model, runtime)
        report.rows.append(CheckRow(backend, str(path.relative_to(folder)), value, float(cosines.mean()), float(cosines.min()), value - base))
    return report
