#!/usr/bin/env bash
# Fetch OSRM's command-line tools (osrm-extract, osrm-contract, osrm-routed, ...) for the differential test
# against real OSRM (tests/server/test_osrm_differential.py): the osrm-bindings wheel ships them as
# manylinux x86_64 binaries. Downloads the pinned wheel into .venv/osrm/ (git-ignored with .venv/) and
# unpacks it there; idempotent and offline once cached (a wheel already in .venv/osrm/ or in
# local_data/osrm/ is used without the network). Prints the directory of the binaries as its last line.
#   OSRM_BINDINGS_VERSION  the wheel's version (default below); OSRM_DIR  where to put it (.venv/osrm)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${OSRM_BINDINGS_VERSION:-26.10.0}
dest=${OSRM_DIR:-.venv/osrm}
bin="$dest/wheel/osrm/bin"
if [ -x "$bin/osrm-routed" ] && [ "$(cat "$dest/.unpacked" 2>/dev/null)" = "$version" ]; then
  echo "$bin"; exit 0
fi
py=${PYTHON:-}
if [ -z "$py" ]; then if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi; fi
mkdir -p "$dest"
pattern="osrm_bindings-$version-*manylinux*x86_64.whl"
whl=$(find "$dest" -maxdepth 1 -name "$pattern" | sort | tail -n 1)
if [ -z "$whl" ] && [ -d local_data/osrm ]; then
  seed=$(find local_data/osrm -maxdepth 1 -name "$pattern" | sort | tail -n 1)
  if [ -n "$seed" ]; then cp "$seed" "$dest/"; whl="$dest/$(basename "$seed")"; fi
fi
if [ -z "$whl" ]; then
  echo "fetch_osrm: downloading osrm-bindings==$version into $dest" >&2
  if ! "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
       --platform manylinux_2_28_x86_64 "osrm-bindings==$version" -d "$dest" >&2; then
    echo "fetch_osrm: could not download the osrm-bindings $version wheel (pip download failed; network?)." >&2
    echo "  Put osrm_bindings-$version-cp312-abi3-manylinux_2_28_x86_64.whl into $dest/ by hand." >&2
    exit 1
  fi
  whl=$(find "$dest" -maxdepth 1 -name "$pattern" | sort | tail -n 1)
  [ -n "$whl" ] || { echo "fetch_osrm: pip reported success but no $pattern in $dest" >&2; exit 1; }
fi
rm -rf "$dest/wheel" "$dest/.unpacked"
"$py" - "$whl" "$dest/wheel" <<'PY'
import os, stat, sys, zipfile
whl, out = sys.argv[1:3]
with zipfile.ZipFile(whl) as z:
    z.extractall(out)
b = os.path.join(out, "osrm", "bin")
for f in os.listdir(b):
    p = os.path.join(b, f)
    os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
PY
if ! "$bin/osrm-routed" --version >/dev/null 2>&1; then
  echo "fetch_osrm: $bin/osrm-routed does not run on this machine:" >&2
  "$bin/osrm-routed" --version >&2 || true
  exit 1
fi
echo "$version" > "$dest/.unpacked"
echo "$bin"
