#!/usr/bin/env bash
# Installs vtc's build and test dependencies from Debian 12's archive.
# Skips apt entirely when everything is already installed, unless
# VTC_FORCE_APT=1 (CI sets it, so a fresh machine always gets the packages).
set -euo pipefail

PACKAGES=(
  cmake ninja-build ccache g++ pkg-config git
  libfmt-dev catch2
  llvm-14-dev    # LLVM ADT (libLLVMSupport, headers) for the IR, passes and step tables
  llvm-14-tools  # FileCheck, for the IR goldens
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libicu-dev
  clang-14 libclang-rt-14-dev
  nodejs npm
  chromium  # the web chat's browser test (tests/serve/webui_test.sh)
  curl
  haproxy  # scripts/cluster-check.sh: replicas behind the load balancer of deploy/haproxy.cfg
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from elsewhere (a preinstalled Node); accept working binaries.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sed '/^$/d')

if [[ ${#missing[@]} -eq 0 && "${VTC_FORCE_APT:-0}" != 1 ]]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
echo "install-deps: installing ${missing[*]:-(forced)}"
$SUDO apt-get update -qq
# Install the full list when forced, so CI proves the list is complete.
if [[ "${VTC_FORCE_APT:-0}" == 1 ]]; then missing=("${PACKAGES[@]}"); fi
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sed '/^$/d')
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
