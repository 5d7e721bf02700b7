#!/bin/sh
# CBF benchmarks (issue 3): CTF -> CBF conversion against the single-threaded CTF parse, and
# reading a page-cached CBF file against `cat FILE > /dev/null`. Extra arguments go to
# `exfeed bench cbf` (e.g. --mb 200 --runs 5 --dir /some/disk).
set -eu
cd "$(dirname "$0")/.."
cargo build --release --locked -p exfeed-cli
exec target/release/exfeed bench cbf "$@"
