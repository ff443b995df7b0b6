#!/usr/bin/env bash
# The headless browser tests/nodes/test_explorer_browser.py drives (Selenium + chromedriver): Debian's chromium and chromium-driver.
# Nothing to do when both are there; otherwise apt-get installs them (as root, or through sudo when it needs no
# password). Exits nonzero when it cannot: the browser tests then fail saying so (they never skip).
set -euo pipefail
CHROMIUM=${VERITY_CHROMIUM:-/usr/bin/chromium}
DRIVER=${VERITY_CHROMEDRIVER:-/usr/bin/chromedriver}
if [ -x "$CHROMIUM" ] && [ -x "$DRIVER" ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  SUDO=
elif command -v sudo > /dev/null && sudo -n true 2> /dev/null; then
  SUDO="sudo -n"
else
  echo "install_browser.sh: $CHROMIUM / $DRIVER missing and not root: run 'apt-get install -y chromium chromium-driver' as root" >&2
  exit 1
fi
echo "installing chromium and chromium-driver (apt) for the explorer's browser tests"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver > /dev/null \
  || { $SUDO apt-get update -q > /dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver > /dev/null; }
[ -x "$CHROMIUM" ] && [ -x "$DRIVER" ]
