#!/usr/bin/env bash
# The browser tests/test_html_report.py opens report.html in: Debian's chromium and chromium-driver (headless, driven
# by selenium). `make setup` runs this after the venv: they are installed where missing when running as root with
# apt-get (as scripts/slurm_cluster.sh installs Slurm); otherwise it says how, and setup carries on. make test's
# browser test then fails, saying the same: it is never skipped.
set -uo pipefail
packages=(chromium chromium-driver)
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "note: chromium and chromedriver are not installed; make test opens report.html in them." >&2
  echo "      install them as root: apt-get install ${packages[*]} (or rerun make setup as root)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh image's package lists are empty: update them only when the install finds nothing.
if ! apt-get install -y -q "${packages[@]}" >/dev/null 2>&1; then
  apt-get update -q >/dev/null 2>&1
  apt-get install -y -q "${packages[@]}" >/dev/null 2>&1 \
    || echo "warning: apt-get install ${packages[*]} failed; make test's browser test fails until they are installed" >&2
fi
command -v chromium >/dev/null && echo "browser ready: $(chromium --version 2>/dev/null | head -1)"
exit 0
