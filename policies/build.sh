#!/bin/sh
# Rebuilds the built-in policy modules (run by `go generate ./policies`).
# The output is a release artifact embedded by go:embed, so the build is
# pinned and reproducible; TestBuiltinsUpToDate rebuilds and compares.
#
# A built-in with a policy.wat is hand-written WebAssembly text, assembled
# by wabt's wat2wasm (Debian package wabt; its main.go is the Go reference
# implementation the tests compare it with). The others are Go guests: the
# toolchain from go.mod, -trimpath, no VCS stamp, no build id, no GOWASM
# extensions.
#
# usage: build.sh [OUTDIR]   (default: builtin)
set -eu
cd "$(dirname "$0")"
out=${1:-builtin}
mkdir -p "$out"
for p in epoch-monotonic control-records producer-ids; do
	if [ -f "$p/policy.wat" ]; then
		wat2wasm "$p/policy.wat" -o "$out/$p.wasm"
		continue
	fi
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 GOWASM= GOFLAGS=-buildvcs=false \
		go build -trimpath -buildmode=c-shared -ldflags=-buildid= -o "$out/$p.wasm" "./$p"
done
