"""Where a supervised adapt candidate's seconds go: a cProfile of `sentune adapt ... --methods supervised` broken into
exclusive parts (docs/timings.md, "Where a supervised candidate's minutes go").

Profile first, then read the profile(s); several give the table's columns side by side:

    OMP_NUM_THREADS=1 python -m cProfile -o before.prof -m sentune adapt --example mrpc --methods supervised --out OUT --quiet
    python benchmarks/speed/supervised_profile.py before.prof after.prof

The parts are read off the call graph by function (cumulative seconds, or the seconds a function spent when called from
one caller), so they add up to the candidate's own time (Supervised.produce); 'other' is what no part names.
"""

from __future__ import annotations

import argparse
import pstats
from pathlib import Path


class Profile:
    def __init__(self, path: Path) -> None:
        self.stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]  # {(file, line, function): (calls, ..., cumulative, callers)}

    def _keys(self, file_end: str, function: str) -> list:
        return [key for key in self.stats if key[0].endswith(file_end) and key[2] == function]

    def cumulative(self, file_end: str, function: str) -> float:
        return sum(self.stats[key][3] for key in self._keys(file_end, function))

    def called_from(self, file_end: str, function: str, caller_end: str, caller: str) -> float:
        """Seconds `function` spent when called by `caller`."""
        return sum(
            edge[3]
            for key in self._keys(file_end, function)
            for where, edge in self.stats[key][4].items()
            if where[0].endswith(caller_end) and where[2] == caller
        )

    def parts(self) -> tuple[float, list[tuple[str, float]]]:
        """The candidate's seconds and its exclusive parts."""
        total = max(self.stats[key][3] for key in self._keys("sentune/adaptation/candidates/supervised.py", "produce"))  # the supervised one: the largest
        trainer = "sentune/training/trainer.py"
        trainings = self.cumulative(trainer, "train") + self.cumulative(trainer, "train_in_memory")
        loop = self.cumulative("transformers/trainer.py", "_inner_training_loop")
        steps = self.cumulative("transformers/trainer.py", "training_step") + self.cumulative("torch/optim/adam.py", "step")
        checkpoints = self.cumulative("transformers/trainer.py", "_save_checkpoint")
        collate = self.cumulative("sentence_transformers/base/data_collator.py", "__call__")
        trim = self.called_from("sentune/core/memory.py", "release_freed_memory", trainer, "on_step_end")
        load_at_set_up = self.called_from("sentune/core/models.py", "load_model", trainer, "build_training")
        read_back = sum(
            self.called_from("sentune/core/models.py", "load_model", "sentune/adaptation/candidates/supervised.py", f) for f in ("train", "produce")
        )
        save_model = self.cumulative(trainer, "_save_model")
        remove = sum(self.called_from("shutil.py", "rmtree", trainer, f) for f in ("train", "train_in_memory"))
        evaluate = self.cumulative("sentune/tasks/evaluate.py", "evaluate")
        encode = self.cumulative("sentune/adaptation/candidates/supervised.py", "score_held") + self.cumulative("sentune/adaptation/context.py", "vectors_of")
        tokenise = self.called_from("sentence_transformers/base/model.py", "preprocess", "sentune/core/encode.py", "<lambda>")
        tokenise += self.cumulative("sentune/core/encode.py", "token_lengths")
        found = [
            ("optimiser steps (forward, loss, backward, AdamW)", steps),
            ("training loop besides the steps: tokenising the batches", collate),
            ("training loop besides the steps: malloc_trim after each step", trim),
            ("training loop besides the steps: the rest (callbacks, logging, schedule)", loop - steps - checkpoints - collate - trim),
            ("trainer set-up (recipe checks, pooling, loss, Dataset, Trainer)", trainings - loop - load_at_set_up - save_model - remove - evaluate),
            ("model loading (the start model per training, each trained model read back)", load_at_set_up + read_back),
            ("saving checkpoints (weights and optimiser state)", checkpoints),
            ("saving models and results, removing checkpoints", save_model + remove + evaluate),
            ("encoding the held-out folds and the refit's dev and test", encode),
        ]
        found.append(("other (training rows, records, garbage collection between trainings)", total - sum(seconds for _, seconds in found)))
        found.append(("(tokenising the encoded texts, within encoding)", tokenise))
        return total, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="+", type=Path)
    args = parser.parse_args()
    columns = [Profile(path).parts() for path in args.profiles]
    print("| part | " + " | ".join(f"{path.stem}: s | %" for path in args.profiles) + " |")
    print("|---|" + "---:|---:|" * len(columns))
    for row, (name, _) in enumerate(columns[0][1]):
        print(f"| {name} | " + " | ".join(f"{parts[row][1]:.1f} | {100 * parts[row][1] / total:.1f}" for total, parts in columns) + " |")
    print("| **the candidate** | " + " | ".join(f"**{total:.1f}** | 100" for total, _ in columns) + " |")


if __name__ == "__main__":
    main()
