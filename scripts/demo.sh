#!/usr/bin/env bash
# The main job: install everything, make a workspace from workspace_template/, mount it with the
# offline default embedding model, and show the mount at work (a write, a search, the bundle).
#   MEMFS_DEMO_DIR   where the workspace goes (default ~/memfs-demo); mounted on $MEMFS_DEMO_DIR-mnt
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
MEMFS="$PWD/.venv/bin/memfs"
WS="${MEMFS_DEMO_DIR:-$HOME/memfs-demo}"
MNT="$WS-mnt"

"$MEMFS" init "$WS"
mkdir -p "$MNT"
if grep -qs " $MNT fuse" /proc/mounts; then "$MEMFS" umount "$MNT" || true; fi
"$MEMFS" mount "$WS" "$MNT" --force

today=$(date +%F)
printf '\n## %s - Setup\nInstalled memfs; the team decided to keep agent memory in plain Markdown.\n' \
  "$(date +%H:%M)" >> "$MNT/memory/$today.md"
echo "--- cat \"$MNT/search/what did we decide about memory.md\""
cat "$MNT/search/what did we decide about memory.md"
echo "--- head -20 $MNT/context/main.md"
head -20 "$MNT/context/main.md"
echo "--- $MNT/.memfs/status"
cat "$MNT/.memfs/status"
echo
echo "memfs is mounted on $MNT (workspace $WS). Unmount with: $MEMFS umount $MNT"
