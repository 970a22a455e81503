"""Issue 58, item 5 simulated where BEIR's SciFact test judgements are absent: the SciFact example (dev 400 of the 809
train claims, test the other 409) with its test claims split in two by a seeded shuffle (random.Random(0)): the first
half is --train (a BEIR folder; a claim whose text is also a dev or test claim is dropped, as adapt refuses it), the
second half the test both runs are scored on.

Usage: python benchmarks/runners/scifact_train_split.py DATA_DIR OUT
then, on the same machine:
  sentune adapt --dev OUT/example/dev --test OUT/test --out RUN_WITHOUT --quiet
  sentune adapt --dev OUT/example/dev --test OUT/test --train OUT/train --out RUN_WITH --quiet
benchmarks/results/search_train.md (benchmarks/renderers/render_search_train.py) renders the two runs' results.json.
"""

import random
import sys
from pathlib import Path

from sentune.adaptation.examples import write_example
from sentune.data.beir import RetrievalSet, read_beir_folder, write_beir_folder

data, out = Path(sys.argv[1]), Path(sys.argv[2])
files = write_example("scifact", data, out / "example", allow_modified=False)
test = read_beir_folder(files.test, "test")
order = list(range(len(test.queries)))
random.Random(0).shuffle(order)
half = set(order[: len(order) // 2])
train = [q for i, q in enumerate(test.queries) if i in half]
rest = [q for i, q in enumerate(test.queries) if i not in half]
seen = {q.text for q in read_beir_folder(files.dev, "dev").queries + rest}  # adapt refuses a train query that is also a dev or test query
train = [q for q in train if q.text not in seen]
write_beir_folder(out / "train", RetrievalSet(train, test.corpus), "train")
write_beir_folder(out / "test", RetrievalSet(rest, test.corpus), "test")
print(f"dev {files.dev}; train {len(train)} queries, test {len(rest)} queries")
