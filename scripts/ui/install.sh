#!/usr/bin/env bash
# Installs what the dashboard's browser tests drive: Debian's Chromium and
# playwright-core from npm (both pinned; playwright-core downloads no
# browser). Idempotent; prints the node_modules directory.
set -euo pipefail
CHROMIUM=${CHROMIUM_VERSION:-156.0.8078.79-1~deb12u1}
PW=${PLAYWRIGHT_CORE_VERSION:-1.65.1}
DIR=${PRORL_UI_NPM:-$HOME/.cache/prorl/npm-ui}
if [ "$(dpkg-query -W -f '${Version}' chromium 2>/dev/null)" != "$CHROMIUM" ]; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "chromium=$CHROMIUM" >&2
fi
mkdir -p "$DIR"
[ -f "$DIR/package.json" ] || echo '{"name":"prorl-ui-test","private":true}' > "$DIR/package.json"
if [ "$(cat "$DIR/.prorl-installed" 2>/dev/null)" != "$PW" ]; then
  (cd "$DIR" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund "playwright-core@$PW" >&2)
  echo "$PW" > "$DIR/.prorl-installed"
fi
echo "$DIR/node_modules"
