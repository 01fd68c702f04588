# Shared by scripts/demo and scripts/test: dependency check/installation and the build.
# shellcheck shell=bash

HCASIM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Debian packages by purpose.
HCASIM_BUILD_PKGS="cmake g++ make pkg-config libsystemc-dev libibverbs-dev librdmacm-dev zlib1g-dev libhiredis-dev"
HCASIM_TEST_PKGS="libgtest-dev ibverbs-utils rdmacm-utils perftest libgloo-dev tshark redis-server clang-format-14 universal-ctags"
HCASIM_DOC_PKGS="doxygen graphviz"

# hcasim_need_packages PKG...: install what is missing (as root) or say how to.
hcasim_need_packages() {
  local missing=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "hcasim: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; the default answer is fine.
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null || {
      echo "hcasim: apt-get install failed for: ${missing[*]}" >&2
      return 1
    }
  else
    echo "hcasim: missing Debian packages. Run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    return 1
  fi
}

# hcasim_build PRESET [TARGET...]: configure (once) and build with a CMake preset.
hcasim_build() {
  local preset=$1
  shift
  local jobs
  jobs=$(nproc 2>/dev/null || echo 2)
  cmake --preset "$preset" -S "$HCASIM_ROOT" >/dev/null || return 1
  if [ $# -gt 0 ]; then
    local t args=()
    for t in "$@"; do args+=(--target "$t"); done
    cmake --build --preset "$preset" -j "$jobs" "${args[@]}"
  else
    cmake --build --preset "$preset" -j "$jobs"
  fi
}
