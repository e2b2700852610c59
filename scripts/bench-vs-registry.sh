#!/usr/bin/env bash
# ALP's HTTP upload/download figures side by side with the CNCF distribution registry (Debian package
# docker-registry 2.8.2, filesystem driver, its own instance on a free 127.0.0.1 port and a temp root),
# pushed and pulled by the same Node fetch client with the same sizes; prints the ALP/registry ratios.
# Installs docker-registry with apt-get when it is absent. ALP_BENCH_QUICK=1 for a smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker-registry >/dev/null 2>&1 && [ ! -x /usr/bin/docker-registry ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq docker-registry
fi

ALP_BENCH_REGISTRY=1 exec node --import tsx bench/run.ts http
