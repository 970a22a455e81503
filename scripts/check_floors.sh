#!/usr/bin/env bash
# Install sentune with every dependency at its floor (scripts/floors.txt) into .venv-floors and run the
# tests that cover the library seams: model loading, the trainer (resume included), every method, the
# architecture. Extra arguments go to pytest (e.g. nothing: the subset; `tests`: the whole suite).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv-floors"
quiet=(-q --disable-pip-version-check)
if [ ! -x "$venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$venv"
fi
stamp="$venv/.floors"
want="$(cat "$repo/scripts/floors.txt" "$repo/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "floors: installing the floor versions into $venv"
  "$venv/bin/pip" install "${quiet[@]}" "$(grep '^torch==' "$repo/scripts/floors.txt")"  # the CPU build on this disk first
  "$venv/bin/pip" install "${quiet[@]}" -c "$repo/scripts/floors.txt" -e "$repo[test]"
  echo "$want" > "$stamp"
fi
"$venv/bin/pip" list --format=freeze 2>/dev/null | grep -iE "^($(grep -v '^#' "$repo/scripts/floors.txt" | cut -d= -f1 | paste -sd'|'))==" || true
cd "$repo"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ "$#" -eq 0 ]; then
  # The kill-and-resume test is left to the main suite: its kill lands at a random moment (see issue notes); so are the
  # other model families of the registry test (the floors are about library versions, which the BERT runs show).
  set -- tests/test_architecture.py tests/test_registry.py tests/test_train.py tests/test_build.py -k "not resume_after_kill and not tiny_mpnet_dir and not tiny_roberta_dir"
fi
"$venv/bin/python" -m pytest -q --slow "$@"
