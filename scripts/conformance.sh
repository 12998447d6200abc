#!/usr/bin/env bash
# conformance.sh [LOGDIR]: pjdfstest, the POSIX suite FUSE file systems are held to, on a memfs mount
# made as a new user makes one (a fresh workspace, the defaults: watcher on, offline embedding), as
# root, with --allow-other: pjdfstest switches to other uids, which reach a mount only through it. Prints passed/failed per folder and exits non-zero if anything failed. The suite and its
# runner are third-party and live outside the project: ../shared/conformance/pjdfstest.sh, or
# $MEMFS_CONFORMANCE/pjdfstest.sh. Takes about 5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNNER=${MEMFS_CONFORMANCE:-$(cd .. && pwd)/shared/conformance}/pjdfstest.sh
[ -f "$RUNNER" ] || { echo "conformance: no pjdfstest runner at $RUNNER (set MEMFS_CONFORMANCE)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "conformance: pjdfstest switches users: run it as root" >&2; exit 2; }
MEMFS=${MEMFS:-.venv/bin/memfs}
ROOT=$(mktemp -d /tmp/memfs-conformance.XXXXXX)
export MEMFS_STATE_DIR=$ROOT/state
mkdir -p "$ROOT/mnt" && cp -r workspace_template "$ROOT/ws"
"$MEMFS" mount --allow-other "$ROOT/ws" "$ROOT/mnt"
trap '"$MEMFS" umount --force "$ROOT/mnt" >/dev/null 2>&1 || true' EXIT
bash "$RUNNER" "$ROOT/mnt" "${1:-$ROOT/logs}" | tee "$ROOT/summary.txt"
grep -q " 0 failed;" "$ROOT/summary.txt"
