#!/usr/bin/env bash
# The hook at work, offline: a project whose .venv is the demo environment (cu12 and cu13
# cuDNN installed over the same paths, the cu13 bytes on disk), its requirements.txt the
# `uv pip freeze` of it. Dropping the cu13 line is refused; a comment is accepted.
#
#   bash examples/pre-commit/run.sh [WORKDIR]
#
# Needs: python3 with cudatx and pre-commit installed (python3 -m pip install . pre-commit).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:-$(mktemp -d)}
UV=$(python3 -c 'from uv import find_uv_bin; print(find_uv_bin())')
export GIT_AUTHOR_NAME=example GIT_AUTHOR_EMAIL=example@example.invalid
export GIT_COMMITTER_NAME=example GIT_COMMITTER_EMAIL=example@example.invalid
export PRE_COMMIT_HOME="$WORK/pre-commit-home"

cudatx demo --keep "$WORK/demo" >/dev/null
mkdir -p "$WORK/project" && cd "$WORK/project"
ln -s "$WORK/demo/venv" .venv
# The sample config, offline (the demo's wheels are local files).
sed 's/args: \[--python, .venv\]/args: [--python, .venv, --offline]/' \
  "$HERE/.pre-commit-config.yaml" > .pre-commit-config.yaml
"$UV" pip freeze --python .venv > requirements.txt
git init -q && git add . && git commit -qm "freeze" && pre-commit install >/dev/null

echo "== Drop the line of nvidia-cudnn-cu13 (its bytes are the ones on disk)"
grep -v '^nvidia-cudnn-cu13' requirements.txt > requirements.new && mv requirements.new requirements.txt
git add requirements.txt
if git commit -qm "drop cu13"; then echo "accepted: unexpected" >&2; exit 1; fi
git checkout -q HEAD -- requirements.txt

echo "== Add a comment"
sed -i '1i # pinned by uv pip freeze' requirements.txt
git add requirements.txt && git commit -qm "a comment" && echo "accepted"
