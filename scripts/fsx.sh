#!/usr/bin/env bash
# fsx.sh FSX_SOURCE.c [OPS]: fsx, the classic file-system exerciser, on a memfs mount. It runs OPS
# (default 100000) random reads, writes, mapped reads and writes, truncates, and whichever fallocate
# modes and copy ranges the mount supports, on one file, checking every byte and the size after each
# operation against its own copy. Runs, each on a fresh file: a native temp folder (the time to
# compare with), a plain file on a fresh memfs mount (fsxfile) and a memory file on it
# (memory/2026-11-25.md: indexed and versioned at every close and fsync), with the file closed and
# reopened now and then; then both again with O_DIRECT (fsx -Z, no mapped I/O), which memfs serves
# with direct_io: every read and write reaches memfs instead of the kernel's page cache. Prints
# PASS/FAIL and the time of each run and exits non-zero if any failed; a failing run's operation
# history (.fsxlog) is kept in the log folder.
#
# fsx is third-party (GPL) and not part of the project: FSX_SOURCE.c (or $FSX_SOURCE) is xfstests'
# ltp/fsx.c (github.com/kdave/xfstests), or the older standalone LTP fsx-linux.c. xfstests' fsx
# includes two headers of its build tree; the stand-ins below give it what it uses, so the one file
# is enough. Built once with gcc, cached under ~/.cache/memfs-conformance by the source's hash.
#
# Env: FSX_OPTS replaces the default options, FSX_SEED (default 1; 0 = time), FSX_LOGDIR,
# MEMFS (the memfs executable), FSX_TARGETS (default "native plain memory plain-direct memory-direct").
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:-${FSX_SOURCE:-}}
OPS=${2:-100000}
[ -n "$SRC" ] && [ -f "$SRC" ] || { echo "usage: fsx.sh FSX_SOURCE.c [OPS]  (xfstests ltp/fsx.c; or set FSX_SOURCE)" >&2; exit 2; }
[[ "$OPS" =~ ^[1-9][0-9]*$ ]] || { echo "fsx: OPS must be a positive number, not '$OPS'" >&2; exit 2; }
command -v gcc >/dev/null || { echo "fsx: gcc is needed to build fsx (apt-get install gcc)" >&2; exit 2; }
MEMFS=${MEMFS:-.venv/bin/memfs}
[ -x "$MEMFS" ] || { echo "fsx: no memfs at $MEMFS (run scripts/setup.sh, or set MEMFS)" >&2; exit 2; }

CACHE=${MEMFS_CONFORMANCE_CACHE:-$HOME/.cache/memfs-conformance}
FSX=$CACHE/fsx-$(sha256sum "$SRC" | cut -c1-12)
if [ ! -x "$FSX" ]; then
  SHIM=$CACHE/fsx-shim
  mkdir -p "$SHIM"
  # Stand-in for xfstests' global.h (which wants its autoconf config.h): the system headers it
  # pulls in and the two rounding helpers fsx uses.
  cat > "$SHIM/global.h" <<'EOF'
#ifndef FSX_SHIM_GLOBAL_H
#define FSX_SHIM_GLOBAL_H
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/param.h>
#include <sys/time.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdint.h>
#include <getopt.h>
#include <assert.h>
#include <linux/falloc.h>
#include <linux/fs.h>
static inline unsigned long long rounddown_64(unsigned long long x, unsigned int y) { return x / y * y; }
static inline unsigned long long roundup_64(unsigned long long x, unsigned int y) { return rounddown_64(x + y - 1, y); }
#endif
EOF
  # Stand-in for xfstests' statx.h: fsx asks statx only for atomic-write limits, and atomic writes
  # need O_DIRECT (-Z), which a FUSE passthrough run does not use: report "unknown" so fsx leaves
  # them off.
  cat > "$SHIM/statx.h" <<'EOF'
#ifndef FSX_SHIM_STATX_H
#define FSX_SHIM_STATX_H
#include <errno.h>
#include <sys/stat.h>
#define statx fsx_shim_statx
struct statx { unsigned long long stx_attributes; unsigned stx_atomic_write_unit_min, stx_atomic_write_unit_max; };
#ifndef STATX_WRITE_ATOMIC
#define STATX_WRITE_ATOMIC 0x00010000U
#endif
#ifndef STATX_ATTR_WRITE_ATOMIC
#define STATX_ATTR_WRITE_ATOMIC 0x00400000
#endif
static inline int xfstests_statx(int dfd, const char *path, unsigned flags, unsigned mask, struct statx *stx)
{ (void)dfd; (void)path; (void)flags; (void)mask; (void)stx; errno = ENOSYS; return -1; }
#endif
EOF
  gcc -O2 -w -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -DHAVE_LINUX_FALLOC_H -DHAVE_COPY_FILE_RANGE -DHAVE_ERR_H \
      -I"$SHIM" -o "$FSX.tmp" "$SRC" && mv "$FSX.tmp" "$FSX" ||
    { echo "fsx: build of $SRC failed" >&2; exit 2; }
fi

# Default options: everything on (mapped reads and writes, truncates, fallocate modes, copy range:
# fsx probes each at start and turns off what the file system refuses, listed as "unsupported"),
# a close and reopen 1 in 500 operations (a flush: an index run for a memory file), and -f: after
# each write, map the range written and msync(MS_INVALIDATE) it.
FSX_OPTS=${FSX_OPTS:--c 500 -f}
SEED=${FSX_SEED:-1}
ROOT=$(mktemp -d /tmp/memfs-fsx.XXXXXX)
LOGDIR=${FSX_LOGDIR:-$ROOT/logs}
mkdir -p "$LOGDIR"; LOGDIR=$(cd "$LOGDIR" && pwd)
export MEMFS_STATE_DIR=$ROOT/state
mkdir -p "$ROOT/native" "$ROOT/mnt"
cp -r workspace_template "$ROOT/ws"; mkdir -p "$ROOT/ws/memory"
MOUNTED=
FAILED=0
cleanup() {
  [ -z "$MOUNTED" ] || "$MEMFS" umount "$ROOT/mnt" >/dev/null 2>&1 || "$MEMFS" umount --force "$ROOT/mnt" >/dev/null 2>&1 || true
  # The index and history of a memory-file run reach hundreds of MB (a version per fsync): gone,
  # as are the files, unless a run failed (fsx's message names the file to compare).
  # rmdir first: never rm -r through a mount that failed to go.
  [ "$FAILED" != 0 ] || { rmdir "$ROOT/mnt" && rm -rf "$ROOT/state" "$ROOT/ws" "$ROOT/native"; } 2>/dev/null || true
}
trap cleanup EXIT
"$MEMFS" mount "$ROOT/ws" "$ROOT/mnt"; MOUNTED=1

echo "fsx $(basename "$SRC") ($FSX), $OPS ops, seed $SEED, options: $FSX_OPTS; logs: $LOGDIR"
run() {  # run LABEL FILE [EXTRA_OPTION...]
  local label=$1 file=$2 out="$LOGDIR/$1.out" rc=0 t0 t1
  shift 2
  mkdir -p "$LOGDIR/$label"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086  # FSX_OPTS is a list of options
  "$FSX" $FSX_OPTS "$@" -S "$SEED" -N "$OPS" -P "$LOGDIR/$label" "$file" > "$out" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  local secs unsupported
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  unsupported=$(sed -n -e 's/.*does not support fallocate mode 0,.*/fallocate/p' \
    -e 's/.*does not support \(fallocate mode FALLOC_FL_\)\{0,1\}\(.*\), disabling!.*/\2/p' "$out" |
    sed 's/ | FALLOC_FL_/+/' | paste -sd, - | sed 's/,/, /g')
  if [ "$rc" = 0 ] && grep -q "All [0-9]* operations completed A-OK" "$out"; then
    printf '%-13s PASS %7s s  %s\n' "$label" "$secs" "${unsupported:+unsupported: $unsupported}"
  else
    FAILED=1
    printf '%-13s FAIL %7s s  (exit %s) %s\n' "$label" "$secs" "$rc" "${unsupported:+unsupported: $unsupported}"
    grep -v -e "^skipping" -e "disabling!" "$out" | tail -n 25 | sed 's/^/    /'
    echo "    full output: $out; operation history: $(ls "$LOGDIR/$label"/*.fsxlog 2>/dev/null | head -1)"
  fi
}
# O_DIRECT on memfs needs no alignment (FUSE direct_io); a native O_DIRECT run would (-r/-w 4096),
# so there is no native one to compare with.
for target in ${FSX_TARGETS:-native plain memory plain-direct memory-direct}; do
  case $target in
    native) run native "$ROOT/native/fsxfile" ;;
    plain)  run plain "$ROOT/mnt/fsxfile" ;;
    memory) run memory "$ROOT/mnt/memory/2026-11-25.md" ;;
    plain-direct)  run plain-direct "$ROOT/mnt/fsxfile.direct" -Z -R -W ;;
    memory-direct) run memory-direct "$ROOT/mnt/memory/2026-11-26.md" -Z -R -W ;;
    *) echo "fsx: unknown target '$target' (native, plain, memory, plain-direct, memory-direct)" >&2; exit 2 ;;
  esac
done
exit "$FAILED"
