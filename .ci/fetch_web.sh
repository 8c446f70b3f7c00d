#!/usr/bin/env bash
# Fetch the third-party JavaScript of the web page that `gpuroute serve` shows at / (Leaflet,
# leaflet-routing-machine and leaflet-geoman-free) from the npm registry with `npm pack`, pinned by version
# and checked against the registry's sha512 integrity. Unpacks each package (LICENSE files included) into
# .venv/web/<name>/ (git-ignored with .venv/), where the server looks for them (GPUROUTE_WEB_ASSETS
# overrides the place); <name> is the npm name without its scope (@geoman-io/leaflet-geoman-free ->
# leaflet-geoman-free), the name the server's /vendor/<name>/ route knows.
# Idempotent and offline once cached: tarballs already in .venv/web/tgz/ or in local_data/web/ are used
# without the network. Prints the assets directory as its last line.
#   WEB_DIR  where to put them (.venv/web)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${WEB_DIR:-.venv/web}
# name version sha512-integrity [npm name, when scoped] (npm view NPMNAME@VERSION dist.integrity)
packages=(
  "leaflet 1.9.4 sha512-nxS1ynzJOmOlHp+iL3FyWqK89GtNL8U8rvlMOsQdTTssxZwCXh8N2NB3GDQOL+YR3XnWyZAxwQixURb+FA74PA=="
  "leaflet-routing-machine 3.2.12 sha512-HLde58G1YtD9xSIzZavJ6BPABZaV1hHeGst8ouhzuxmSC3s32NVtADT+njbIUMW1maHRCrsgTk/E4hz5QH7FrA=="
  "leaflet-geoman-free 2.20.2 sha512-KQpSe0VKyuVCudq/08rMjJW1vvIwFldTwBny2wZ7ABcyyUAP7/eoFo967hCu9yRqAAHb4QOxC6gY5dGqttY68g== @geoman-io/leaflet-geoman-free"
)
stamp=$(printf '%s\n' "${packages[@]}" | cut -d' ' -f1,2 | tr '\n' ' ')
if [ "$(cat "$dest/.unpacked" 2>/dev/null)" = "$stamp" ] && [ -f "$dest/leaflet/dist/leaflet.js" ] \
   && [ -f "$dest/leaflet-routing-machine/dist/leaflet-routing-machine.js" ] \
   && [ -f "$dest/leaflet-geoman-free/dist/leaflet-geoman.js" ]; then
  echo "$dest"; exit 0
fi
py=${PYTHON:-}
if [ -z "$py" ]; then if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi; fi
mkdir -p "$dest/tgz"
for spec in "${packages[@]}"; do
  read -r name version integrity npm_name <<<"$spec"
  npm_name=${npm_name:-$name}
  tgz="$dest/tgz/$name-$version.tgz"
  if [ ! -f "$tgz" ] && [ -f "local_data/web/$name-$version.tgz" ]; then cp "local_data/web/$name-$version.tgz" "$tgz"; fi
  if [ ! -f "$tgz" ]; then
    if ! command -v npm >/dev/null 2>&1; then
      echo "fetch_web: npm is not installed: install Node.js and npm (apt-get install nodejs npm), or put" >&2
      echo "  $name-$version.tgz (npm pack $npm_name@$version, renamed) into $dest/tgz/ by hand." >&2
      exit 1
    fi
    log=$(mktemp)
    if ! (cd "$dest/tgz" && npm pack --silent "$npm_name@$version") >"$log" 2>&1; then
      echo "fetch_web: npm pack $npm_name@$version failed (network?):" >&2
      cat "$log" >&2; rm -f "$log"
      exit 1
    fi
    packed="$dest/tgz/$(tail -n 1 "$log")"  # npm's file name (a scoped name: scope-name-version.tgz)
    rm -f "$log"
    if [ "$packed" != "$tgz" ] && [ -f "$packed" ]; then mv "$packed" "$tgz"; fi
    [ -f "$tgz" ] || { echo "fetch_web: npm pack reported success but $tgz is missing" >&2; exit 1; }
  fi
  if ! "$py" - "$tgz" "$integrity" <<'PY'
import base64, hashlib, sys
path, want = sys.argv[1:3]
algo, _, digest = want.partition("-")
with open(path, "rb") as f:
    got = base64.b64encode(hashlib.new(algo, f.read()).digest()).decode()
sys.exit(0 if got == digest else 1)
PY
  then
    echo "fetch_web: $tgz does not match the pinned integrity $integrity; removed, run again" >&2
    rm -f "$tgz"
    exit 1
  fi
  tmp="$dest/.tmp-$name"
  rm -rf "$tmp"; mkdir -p "$tmp"
  tar xzf "$tgz" -C "$tmp"
  rm -rf "${dest:?}/$name"
  mv "$tmp/package" "$dest/$name"
  rm -rf "$tmp"
done
echo "$stamp" > "$dest/.unpacked"
echo "$dest"
