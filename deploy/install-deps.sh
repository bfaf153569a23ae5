#!/usr/bin/env bash
# Installs every Debian package Leakwatch needs to build, test and run (Debian 12).
# Safe to run again: apt-get skips what is already there.
set -euo pipefail

packages=(
  # build
  build-essential cmake pkg-config git ca-certificates
  # shared/ (libleakcore)
  libzstd-dev zstd libjansson-dev
  # server/ and client/
  libmicrohttpd-dev libcurl4-openssl-dev libpq-dev
  # PostgreSQL for tests and the local quickstart
  postgresql-15
  # JVM parts: agent, facade, test programs that dump real heaps
  openjdk-17-jdk-headless
  # tests: cmocka units, clang for libFuzzer targets and sanitizers
  libcmocka-dev clang libclang-rt-14-dev
  # tools the scripts use (strace: a leakd test holds a process in a system call with it)
  curl procps util-linux strace
  # leakd's integration tests (tests/server/test_leakd.py): stdlib + YAML + JSON Schema
  python3 python3-yaml python3-jsonschema
  # and its HTTPS test makes a certificate
  openssl
)

if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else
  sudo=
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
