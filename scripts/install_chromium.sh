#!/usr/bin/env bash
# Browser tests drive Debian's Chromium with Playwright (Playwright's own browser download
# does not work offline). Install it when missing and we may; otherwise say why not.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's chromium (and CJK fonts) for the browser tests..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null
elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo apt-get update -qq
  sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null
else
  echo "Chromium is not installed and cannot be installed here: browser tests will skip." >&2
fi
