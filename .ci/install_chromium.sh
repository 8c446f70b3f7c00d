#!/usr/bin/env bash
# Debian's Chromium for the browser test of the web page (tests/server/test_web_page.py drives it with
# playwright; no browser is downloaded by playwright itself). Idempotent: does nothing when
# /usr/bin/chromium runs; otherwise installs the Debian package with apt-get (as root, or through sudo),
# refreshing the package lists only when the first try fails. Quiet unless something goes wrong.
#   CHROMIUM  the browser to check (default /usr/bin/chromium)
set -euo pipefail
browser=${CHROMIUM:-/usr/bin/chromium}
if [ -x "$browser" ] && "$browser" --version >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "install_chromium: $browser is missing and this user cannot apt-get install; as root run:" >&2
  echo "  apt-get update && apt-get install -y chromium" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_chromium: $browser is missing and there is no apt-get: install Chromium by hand" >&2
  exit 1
fi
log=$(mktemp)
install() { DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq chromium >>"$log" 2>&1; }
echo "install_chromium: installing Debian's chromium (apt-get)" >&2
if ! install; then
  if ! { "${sudo[@]}" apt-get update -qq >>"$log" 2>&1 && install; }; then
    echo "install_chromium: apt-get install chromium failed:" >&2
    tail -n 20 "$log" >&2; rm -f "$log"
    exit 1
  fi
fi
rm -f "$log"
if ! "$browser" --version >/dev/null 2>&1; then
  echo "install_chromium: chromium was installed but $browser --version fails" >&2
  exit 1
fi
