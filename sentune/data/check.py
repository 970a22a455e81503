"""`sentune data check DIR`: every task and sentence set readable, example counts against the official
sizes, and sha256 of every file listed in SHA256SUMS when the folder has one."""

from __future__ import annotations

from pathlib import Path

from sentune.data.catalog import load_catalog, load_sentences, load_task, set_catalog, sha256_of
from sentune.data.readers import DataError


def checksum_report(data_dir: Path) -> tuple[list[str], bool]:
    sums = data_dir / "SHA256SUMS"
    if not sums.is_file():
        return ["no SHA256SUMS file: checksums not verified"], True
    lines, ok, checked = [], True, 0
    for number, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2:
            lines.append(f"FAIL {sums}:{number}: malformed line")
            ok = False
            continue
        expected, name = parts[0], parts[1].lstrip("*")
        path = data_dir / name
        if not path.is_file():
            lines.append(f"FAIL {name}: missing")
            ok = False
        elif sha256_of(path) != expected:
            lines.append(f"FAIL {name}: sha256 differs from SHA256SUMS")
            ok = False
        checked += 1
    failed = [line.split(":")[0].removeprefix("FAIL ") for line in lines if line.startswith("FAIL")]
    if failed:
        lines.append(f"FAIL sha256: {len(failed)} of {checked} files listed in SHA256SUMS failed ({', '.join(failed)})")
    else:
        lines.append(f"ok   sha256 of {checked} files listed in SHA256SUMS")
    return lines, ok


def check_data_dir(data_dir: Path, *, verify_checksums: bool = True) -> tuple[str, bool]:
    if not data_dir.is_dir():
        return f"{data_dir}: not a directory", False
    lines, ok = [f"data directory {data_dir}"], True
    for spec in load_catalog().values():
        try:
            examples = load_task(spec, data_dir, allow_modified=True)  # this report says what differs itself
        except DataError as exc:
            lines.append(f"FAIL {spec.name:<12} {exc}")
            ok = False
            continue
        count = sum(len(v) for v in examples.values())
        if spec.expected_examples is not None and count != spec.expected_examples:
            lines.append(f"FAIL {spec.name:<12} {count} examples, official size is {spec.expected_examples}")
            ok = False
        else:
            lines.append(f"ok   {spec.name:<12} {count} examples")
    for name in set_catalog():
        try:
            lines.append(f"ok   {'set ' + name:<12} {len(load_sentences(name, data_dir))} unique sentences")
        except DataError as exc:
            lines.append(f"FAIL {'set ' + name:<12} {exc}")
            ok = False
    if verify_checksums:
        more, sums_ok = checksum_report(data_dir)
        lines += more
        ok = ok and sums_ok
    lines.append("all checks passed" if ok else "some checks FAILED")
    return "\n".join(lines), ok
