"""`sentune data download DIR`: fetch the canonical sources (sources.yaml) into sentune's layout.

Each file is downloaded to DIR/.downloads/ (atomically: a partial file is never taken for a whole one),
then converted. `base_urls` (the --mirror option) replaces scheme and host of every canonical URL,
for mirrors and for testing against a local server.
"""

from __future__ import annotations

import csv
import io
import logging
import shutil
import tarfile
import urllib.parse
import urllib.request
import zipfile
from functools import cache
from pathlib import Path

import yaml
from tqdm.auto import tqdm

from sentune.errors import UserError

logger = logging.getLogger(__name__)
SOURCES_FILE = Path(__file__).with_name("sources.yaml")


@cache
def sources() -> list[dict]:
    return yaml.safe_load(SOURCES_FILE.read_text(encoding="utf-8"))


def mirrored(url: str, base: str | None) -> str:
    if not base:
        return url
    parts = urllib.parse.urlsplit(url)
    return base.rstrip("/") + parts.path + (f"?{parts.query}" if parts.query else "")


def fetch(url: str, target: Path, *, show_progress: bool = True) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        return target
    partial = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, partial.open("wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=target.name, disable=not show_progress) as bar:
                for block in iter(lambda: response.read(1 << 20), b""):
                    out.write(block)
                    bar.update(len(block))
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise OSError(f"download of {url} failed: {exc}") from exc
    partial.rename(target)
    return target


def _safe_zip_members(archive: zipfile.ZipFile) -> list[str]:
    names = archive.namelist()
    for name in names:
        if name.startswith("/") or ".." in Path(name).parts:
            raise UserError(f"refusing archive member with an unsafe path: {name}")
    return names


def convert_senteval_tar(path: Path, data_dir: Path) -> None:
    """Find the folder holding STS/STSBenchmark inside the tar and copy it to DIR/senteval/."""
    with tarfile.open(path) as archive:
        members = archive.getmembers()
        marker = next((m.name for m in members if m.name.endswith("STS/STSBenchmark/sts-test.csv")), None)
        if marker is None:
            raise UserError(f"{path}: no STS/STSBenchmark/sts-test.csv inside; not the SentEval archive")
        root = marker[: -len("STS/STSBenchmark/sts-test.csv")]
        staging = data_dir / ".downloads" / "senteval-extract"
        shutil.rmtree(staging, ignore_errors=True)
        archive.extractall(staging, members=[m for m in members if m.name.startswith(root)], filter="data")
    target = data_dir / "senteval"
    if target.exists():
        shutil.rmtree(target)
    shutil.move(str(staging / root), target)
    shutil.rmtree(staging, ignore_errors=True)


def convert_wiki_lines(path: Path, data_dir: Path) -> None:
    target = data_dir / "corpora" / "wiki" / "wiki_sentences.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    seen: dict[str, None] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            text = " ".join(line.split())
            if text:
                seen.setdefault(text, None)
    target.write_text("\n".join(seen) + "\n", encoding="utf-8")


def _tsv_rows(archive: zipfile.ZipFile, name: str) -> list[dict]:
    with archive.open(name) as raw:
        return list(csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8"), delimiter="\t", quoting=csv.QUOTE_NONE))


def convert_snli_zip(path: Path, data_dir: Path) -> None:
    out = data_dir / "corpora" / "nli" / "SNLI"
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path) as archive:
        names = _safe_zip_members(archive)
        for split in ("train", "dev", "test"):
            name = next((n for n in names if n.endswith(f"snli_1.0_{split}.txt")), None)
            if name is None:
                continue
            rows = [r for r in _tsv_rows(archive, name) if r["gold_label"] != "-"]
            for field, prefix in (("sentence1", "s1"), ("sentence2", "s2"), ("gold_label", "labels")):
                (out / f"{prefix}.{split}").write_text("\n".join(" ".join(r[field].split()) for r in rows) + "\n", encoding="utf-8")


def convert_xnli_zip(path: Path, data_dir: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in _safe_zip_members(archive) if n.endswith("xnli.dev.tsv"))
        rows = [r for r in _tsv_rows(archive, name) if r["language"] == "en"]
    out = data_dir / "corpora" / "nli" / "XNLI-en" / "dev-en.tsv"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"{r['sentence1']}\t{r['sentence2']}\t{r['gold_label']}\n" for r in rows), encoding="utf-8")


def convert_qqp_zip(path: Path, data_dir: Path) -> None:
    out = data_dir / "corpora" / "qqp"
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path) as archive:
        for split in ("train", "dev"):
            name = next((n for n in _safe_zip_members(archive) if n.endswith(f"QQP/{split}.tsv")), None)
            if name is None:
                continue
            rows = [r for r in _tsv_rows(archive, name) if r.get("question1") and r.get("question2")]
            (out / f"{split}.tsv").write_text(
                "".join(f"{' '.join(r['question1'].split())}\t{' '.join(r['question2'].split())}\t{r['is_duplicate']}\n" for r in rows), encoding="utf-8"
            )


def convert_sts2017_zip(path: Path, data_dir: Path) -> None:
    out = data_dir / "multilingual" / "STS2017"
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path) as archive:
        for name in _safe_zip_members(archive):
            base = Path(name).name
            if base.startswith(("STS.input.track", "STS.gs.track")) and base.endswith(".txt"):
                (out / base).write_bytes(archive.read(name))


def convert_beir_zip(path: Path, data_dir: Path) -> None:
    """A BEIR dataset zip (NAME/corpus.jsonl, NAME/queries.jsonl, NAME/qrels/*.tsv) into DIR/retrieval/NAME/, byte for byte."""
    with zipfile.ZipFile(path) as archive:
        for name in _safe_zip_members(archive):
            parts = Path(name).parts
            if len(parts) >= 2 and (parts[1:] in (("corpus.jsonl",), ("queries.jsonl",)) or (parts[1] == "qrels" and name.endswith(".tsv"))):
                target = data_dir / "retrieval" / Path(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))


CONVERTERS = {
    "senteval_tar": convert_senteval_tar,
    "wiki_lines": convert_wiki_lines,
    "snli_zip": convert_snli_zip,
    "xnli_zip": convert_xnli_zip,
    "qqp_zip": convert_qqp_zip,
    "sts2017_zip": convert_sts2017_zip,
    "beir_zip": convert_beir_zip,
}


def download_all(data_dir: Path, *, base_urls: list[str] | None = None, only: list[str] | None = None, show_progress: bool = True) -> None:
    base = base_urls[0] if base_urls else None
    unknown = sorted(set(only or ()) - {source["name"] for source in sources()})
    if unknown:
        raise UserError(f"--only {', '.join(unknown)}: no such source; choose from {', '.join(source['name'] for source in sources())}")
    for source in sources():
        if only and source["name"] not in only:
            continue
        url = mirrored(source["url"], base)
        logger.info("%s: %s", source["name"], source["what"])
        file = fetch(url, data_dir / ".downloads" / Path(urllib.parse.urlsplit(url).path).name, show_progress=show_progress)
        CONVERTERS[source["convert"]](file, data_dir)
