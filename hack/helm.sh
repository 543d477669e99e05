#!/usr/bin/env bash
# helm.sh builds the real helm command that tests/integration/helm runs (helm
# lint, install, upgrade against the API server of pkg/test/kubeenv), at a
# pinned version, from the Go module proxy, into a versioned cache folder
# outside the repository:
#
#   ${INFERMESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infermesh}/helm/<HELM_VERSION>/bin/helm
#
# It prints that folder (the one holding bin/) as its only, so last, line of
# stdout; every other message goes to stderr. Tests find the binary through
# HELM_TEST_BINARIES=<folder>/bin (make integ sets it).
#
# How: helm.sh/helm/v4 is already a requirement of this module (pkg/manifests
# renders the chart with its template engine), and go.mod names its
# cmd/helm as a tool (`tool helm.sh/helm/v4/cmd/helm`), so go.sum holds what
# that command needs. helm.sh builds it inside this module: HELM_VERSION is
# the version go.mod requires, and every package helm shares with this
# module (client-go, apimachinery, ...) is compiled once into the Go build
# cache for both, which on a cold machine saves most of a separate build
# (architecture/ci.md). Adding the tool changed no version this module
# builds with; helm's own requirements are all met at their versions or
# newer, as in any module that imports helm. The version is stamped the way
# helm's Makefile does (-X helm.sh/helm/v4/internal/version.version), so
# `helm version` names it.
#
# Reuse: when the binary is present and `helm version --template
# '{{.Version}}'` prints HELM_VERSION, nothing is built. A build goes into a
# temporary folder beside the cache folder and is renamed into place at the
# end, so a killed build never leaves a half-written binary. Concurrent runs
# serialise on a lock file (flock); the second finds the folder complete.
#
# Cost on the 2-core machine: see architecture/ci.md.
#
# Environment:
#   INFERMESH_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/infermesh)
#   HELM_VERSION     optional: must equal the helm.sh/helm/v4 version go.mod
#                    requires (change that with `go get`)
#   GO               go command (default go)
set -euo pipefail
# Go 1.27 (Gateway API v1.7.0 needs it): the toolchain the module proxy
# serves, fetched by the go command on first use (README).
export GOTOOLCHAIN=go1.27.3
cd "$(dirname "$0")/.."

GO=${GO:-go}
HELM=helm.sh/helm/v4
REQUIRED=$("$GO" list -m -f '{{.Version}}' "$HELM")
HELM_VERSION=${HELM_VERSION:-$REQUIRED}
CACHE_ROOT=${INFERMESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infermesh}
DEST=$CACHE_ROOT/helm/$HELM_VERSION

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'helm.sh: %s\n' "$*" >&2; exit 1; }

[[ $HELM_VERSION == "$REQUIRED" ]] || die "HELM_VERSION=$HELM_VERSION, but go.mod requires $HELM $REQUIRED: change go.mod (go get $HELM@$HELM_VERSION) instead"

# runs FILE: true when FILE exists and says it is HELM_VERSION.
runs() {
	[[ -x $1 ]] || return 1
	local got
	got=$(HELM_CACHE_HOME=/nonexistent "$1" version --template '{{.Version}}' 2>/dev/null) || return 1
	[[ $got == "$HELM_VERSION" ]]
}

mkdir -p "$CACHE_ROOT/helm"
exec 9>"$CACHE_ROOT/helm/.$HELM_VERSION.lock"
if ! flock -n 9; then
	log "waiting for another helm.sh building $HELM_VERSION"
	flock 9
fi

if runs "$DEST/bin/helm"; then
	log "reusing $DEST"
	printf '%s\n' "$DEST"
	exit 0
fi

# We hold the lock, so any leftover build folder is from a killed run.
rm -rf "$CACHE_ROOT/helm/.build-$HELM_VERSION".*
WORK=$(mktemp -d "$CACHE_ROOT/helm/.build-$HELM_VERSION.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/out/bin"

start=$SECONDS
log "building $HELM/cmd/helm $HELM_VERSION in this module"
"$GO" build -buildvcs=false \
	-ldflags "-s -w -X $HELM/internal/version.version=$HELM_VERSION -X $HELM/internal/version.gitTreeState=clean" \
	-o "$WORK/out/bin/helm" "$HELM/cmd/helm" >&2
log "built helm in $((SECONDS - start)) s"

runs "$WORK/out/bin/helm" || die "the fresh $WORK/out/bin/helm does not report version $HELM_VERSION"
{
	echo "$HELM $HELM_VERSION"
	"$GO" version
} >"$WORK/out/VERSIONS"
rm -rf "$DEST"
mv "$WORK/out" "$DEST"
log "binary in $DEST/bin"
printf '%s\n' "$DEST"
