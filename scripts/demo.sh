#!/usr/bin/env bash
# The main job: install everything, make a workspace from workspace_template/, index it with the
# offline default embedding model, and show memory search working.
#   MEMFS_DEMO_DIR   where the workspace goes (default ~/memfs-demo)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
MEMFS=".venv/bin/memfs"
WS="${MEMFS_DEMO_DIR:-$HOME/memfs-demo}"

"$MEMFS" init "$WS"
today=$(date +%F)
if [ ! -e "$WS/memory/$today.md" ]; then
  printf '# %s\n\n## %s - Setup\nInstalled memfs and made this workspace from the template.\n' "$today" "$(date +%H:%M)" > "$WS/memory/$today.md"
fi
"$MEMFS" index --workspace "$WS"
"$MEMFS" status --workspace "$WS"
"$MEMFS" search --workspace "$WS" "how should I write to memory"
