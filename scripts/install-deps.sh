#!/usr/bin/env bash
# Installs every Debian 12 package devlet needs to build, test and benchmark.
# Idempotent: packages already present are skipped by apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git openssl
  clang-format clang-tidy clang-16 libclang-rt-16-dev llvm-16
  libabsl-dev libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libre2-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libhwloc-dev libseccomp-dev libssl-dev libboost-dev libboost-filesystem-dev
  libcpp-httplib-dev libmbedtls-dev
  runc busybox-static
  python3 curl
  umoci skopeo python3-yaml
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
