#!/usr/bin/env bash
# Copyright infermesh authors
# SPDX-License-Identifier: Apache-2.0
#
# istio-src.sh prepares bench/istio-pipeline/istio-src: Istio's module
# (istio.io/istio at the version bench/istio-pipeline/go.mod requires, the
# one bench/istio and `make bench-compare` use) copied from the Go module
# cache, with the one-line change below, so that it builds in one binary
# with infermesh. That module's go.mod replaces istio.io/istio with this
# folder. The folder is not part of the repository (.gitignore); Istio's
# code is used as a library and never committed here.
#
# Why a change at all: one build holds one version of each module, and
# infermesh needs sigs.k8s.io/gateway-api v1.7.0 where this Istio was
# written against v1.6.0. v1.7.0 added GatewayStatusAddress.Routability, so
# Istio's conversion of a GatewaySpecAddress into a GatewayStatusAddress
# (status of a Gateway Istio does not program) no longer compiles as a type
# conversion; the edit builds the same value field by field. Nothing the
# benchmark runs goes through that line.
#
# Prints the folder. Re-running is cheap: the copy is redone only when the
# version or this script changes.
set -euo pipefail
export GOTOOLCHAIN=go1.27.3

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MOD=$ROOT/bench/istio-pipeline
DEST=$MOD/istio-src

version=$(awk '$1 == "istio.io/istio" && $2 ~ /^v/ {print $2; exit}' "$MOD/go.mod")
compare=$(awk '$1 == "require" && $2 == "istio.io/istio" {print $3; exit} $1 == "istio.io/istio" && $2 ~ /^v/ {print $2; exit}' "$ROOT/bench/istio/go.mod")
if [[ -z $version || $version != "$compare" ]]; then
	echo "istio-src.sh: bench/istio-pipeline requires istio.io/istio '$version', bench/istio '$compare': they must be the same" >&2
	exit 1
fi
stamp="$version $(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
if [[ -f $DEST/.infermesh-stamp && $(cat "$DEST/.infermesh-stamp") == "$stamp" ]]; then
	echo "$DEST"
	exit 0
fi

# The module cache's copy (downloaded if needed, through the module proxy).
src=$(cd "$ROOT/bench/istio" && go mod download -json "istio.io/istio@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [[ -z $src || ! -d $src ]]; then
	echo "istio-src.sh: could not download istio.io/istio@$version" >&2
	exit 1
fi
tmp=$(mktemp -d "$MOD/.istio-src.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp -r "$src/." "$tmp/"
chmod -R u+w "$tmp"

# The one change (see above). It must apply exactly once.
file=$tmp/pilot/pkg/config/kube/gateway/conversion.go
before='return k8s.GatewayStatusAddress(e)'
after='return k8s.GatewayStatusAddress{Type: e.Type, Value: e.Value}'
if [[ $(grep -cF "$before" "$file") != 1 ]]; then
	echo "istio-src.sh: $file: the line to adapt is not there once; this Istio version needs another look" >&2
	exit 1
fi
sed -i "s/$(printf '%s' "$before" | sed 's/[][\.*^$/]/\\&/g')/$after/" "$file"
grep -qF "$after" "$file"

echo "$stamp" >"$tmp/.infermesh-stamp"
rm -rf "$DEST"
mv "$tmp" "$DEST"
trap - EXIT
echo "$DEST"
