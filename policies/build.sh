#!/bin/sh
# Rebuilds the built-in policy modules (run by `go generate ./policies`).
# The output is a release artifact embedded by go:embed, so the build is
# pinned: the toolchain from go.mod, -trimpath, no VCS stamp, no build id,
# no GOWASM extensions. TestBuiltinsUpToDate rebuilds and compares.
#
# usage: build.sh [OUTDIR]   (default: builtin)
set -eu
cd "$(dirname "$0")"
out=${1:-builtin}
mkdir -p "$out"
for p in epoch-monotonic control-records producer-ids; do
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 GOWASM= GOFLAGS=-buildvcs=false \
		go build -trimpath -buildmode=c-shared -ldflags=-buildid= -o "$out/$p.wasm" "./$p"
done
