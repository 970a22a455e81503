"""An index's documents read from documents.jsonl a line at a time (sentune.search.documents), not held in memory: the
arrays `sentune index` writes beside the file are its lines' offsets and its ids' order; a search gives what ranking
with every id and text in memory gave, for the three systems, with and without the query's own document; an index
built without the arrays opens (they are written then, or held in memory when the folder cannot be written); a
changed documents.jsonl is scanned again, and a damaged line is named when it is read."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from test_adapt_retrieval import _toy_beir

from sentune.cli import main
from sentune.data.beir import Query
from sentune.data.text_files import DataError, Source

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

ARRAYS = ("documents.offsets.npy", "documents.order.npy")


@pytest.fixture(scope="module")
def built(tiny_model_dir, tmp_path_factory):
    """A hybrid index (convex, α = 0.4) of the toy corpus in reverse order, so file order is not id order, with five
    texts twice under other ids (one sorting before, one after), so cosine and BM25 ties are decided by id."""
    folder = tmp_path_factory.mktemp("documents")
    dev, _ = _toy_beir(folder / "toy")
    records = [json.loads(line) for line in (dev / "corpus.jsonl").read_text().splitlines()][::-1]
    records += [{"_id": f"{prefix}-copy-{i}", "text": records[i]["text"]} for i in range(5) for prefix in ("a", "z")]
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    index = folder / "index"
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(index), "--quiet", "--fusion", "convex:0.4"]) == 0
    queries = [Query(r["_id"], " ".join(r["text"].split()[:6]), Source("test", n + 1)) for n, r in enumerate(records[:12])]
    queries[0] = Query(records[0]["_id"], records[0]["text"], Source("test", 1))  # its document's whole text, which two copies share
    queries.append(Query("no-such-document", "the cat", Source("test", 13)))
    return {"index": index, "records": records, "queries": queries}


def in_memory_ranking(index, queries, top: int, exclude_same_id: bool) -> list[list[tuple[str, float, str]]]:
    """The ranking with every id and text held in lists, each system by the function it used: the evaluation's
    rank() for dense, hybrid_rank over the ids, top_by_score over id_order for BM25."""
    from sentune.core.encode import Encoder
    from sentune.search.fusion import hybrid_rank, id_order, top_by_score
    from sentune.tasks.retrieval import rank, unit_rows

    lines = [json.loads(line) for line in (index.folder / "documents.jsonl").read_text().splitlines()]
    ids, texts = [r["_id"] for r in lines], [r["text"] for r in lines]
    query_ids = [q.id for q in queries]
    if index.system == "bm25":
        scores = index.lexical().scores([q.text for q in queries])
        own = {doc: i for i, doc in enumerate(ids)}
        ranked = top_by_score(scores, id_order(ids), top, exclude=[own.get(q) for q in query_ids] if exclude_same_id else None)
        ranked = [[d for d in row if scores[r, d] > 0] for r, row in enumerate(ranked)]  # a document sharing no term is no match
        values = [[float(scores[r, d]) for d in row] for r, row in enumerate(ranked)]
    else:
        vectors = np.load(index.folder / "vectors.npy")
        query_vectors = Encoder(index.model(), "model", show_progress=False).encode([q.text for q in queries])
        if index.system == "dense":
            ranked = rank(query_vectors, vectors, ids, depth=top, query_ids=query_ids, skip_same_id=exclude_same_id)
            values = [[float(unit_rows(query_vectors)[r] @ unit_rows(vectors[[d]])[0]) for d in row] for r, row in enumerate(ranked)]
        else:
            lexical = index.lexical().scores([q.text for q in queries])
            ranked, values = hybrid_rank(
                query_vectors,
                vectors,
                lambda rows: lexical[rows],
                ids,
                index.fusion,
                depth=top,
                query_ids=query_ids if exclude_same_id else None,
                with_scores=True,
            )
    return [[(ids[d], v, texts[d]) for d, v in zip(row, scores, strict=True)] for row, scores in zip(ranked, values, strict=True)]


def found(index, queries, top: int, exclude_same_id: bool) -> list[list[tuple[str, float, str]]]:
    return [[(h.doc_id, h.score, h.text) for h in row] for row in index.search(queries, top, exclude_same_id=exclude_same_id)]


@pytest.mark.parametrize("system", ["dense", "bm25", "hybrid"])
def test_a_search_gives_what_the_in_memory_ranking_gave(built, system):
    from sentune.search.index import SearchIndex

    index = SearchIndex.open(built["index"], system)
    everything = len(built["records"])  # every document ranked: every tie at the bottom (BM25's zeros) decided by id
    for top, exclude in ((everything, False), (20, True), (3, False)):
        assert found(index, built["queries"], top, exclude) == in_memory_ranking(index, built["queries"], top, exclude), (top, exclude)
    query = built["queries"][0]  # three documents of its very text, tied in every system: by id, its own in the middle
    assert [doc for doc, _, _ in found(index, [query], 3, False)[0]] == ["a-copy-0", query.id, "z-copy-0"]
    assert [doc for doc, _, _ in found(index, [query], 2, True)[0]] == ["a-copy-0", "z-copy-0"]


def test_the_build_writes_each_line_s_offset_and_each_id_s_rank_in_id_order(built):
    data = (built["index"] / "documents.jsonl").read_bytes()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    assert np.load(built["index"] / ARRAYS[0]).tolist() == starts
    ids = [r["_id"] for r in built["records"]]
    ranks = {doc: i for i, doc in enumerate(sorted(ids))}
    assert np.load(built["index"] / ARRAYS[1]).tolist() == [ranks[doc] for doc in ids]


def copy_without_arrays(built, tmp_path):
    folder = shutil.copytree(built["index"], tmp_path / "index")
    for name in ARRAYS:
        (folder / name).unlink()
    return folder


def test_an_index_built_without_the_arrays_opens_writes_them_and_searches_the_same(built, tmp_path):
    from sentune.search.index import SearchIndex

    folder = copy_without_arrays(built, tmp_path)
    opened = SearchIndex.open(folder)
    assert all((folder / name).read_bytes() == (built["index"] / name).read_bytes() for name in ARRAYS)
    assert {(folder / name).stat().st_mode for name in ARRAYS} == {(folder / "documents.jsonl").stat().st_mode}  # as readable as the documents
    assert found(opened, built["queries"], 10, True) == found(SearchIndex.open(built["index"]), built["queries"], 10, True)
    assert isinstance(SearchIndex.open(folder).documents.offsets, np.memmap)  # the next process maps what was written


def test_a_folder_that_cannot_be_written_keeps_the_arrays_in_memory(built, tmp_path, monkeypatch):
    import sentune.search.documents as documents
    from sentune.search.index import SearchIndex

    def refuse(*args):
        raise PermissionError("read-only")

    monkeypatch.setattr(documents, "save_arrays", refuse)
    folder = copy_without_arrays(built, tmp_path)
    opened = SearchIndex.open(folder)
    assert not any((folder / name).exists() for name in ARRAYS) and not isinstance(opened.documents.offsets, np.memmap)
    assert found(opened, built["queries"], 10, False) == found(SearchIndex.open(built["index"]), built["queries"], 10, False)


def test_a_changed_documents_file_is_scanned_again_and_a_damaged_line_is_named_when_read(built, tmp_path):
    from sentune.search.index import SearchIndex

    folder = shutil.copytree(built["index"], tmp_path / "index")
    path = folder / "documents.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = json.dumps({"_id": json.loads(lines[3])["_id"], "text": "a longer text than the line had before it was changed"}) + "\n"
    path.write_text("".join(lines))
    opened = SearchIndex.open(folder, "bm25")
    assert opened.documents.read([3])[0][1] == "a longer text than the line had before it was changed"
    assert np.load(folder / ARRAYS[0])[-1] == path.stat().st_size  # written again for the file as it is
    lines[7] = "[" + lines[7][1:]  # the same size: the arrays still match, the line is no document
    path.write_text("".join(lines))
    opened = SearchIndex.open(folder, "bm25")
    with pytest.raises(DataError, match=f"{path}:8: not a document"):
        opened.documents.read([7])
    assert opened.documents.read([6])[0][0] == json.loads(lines[6])["_id"]
