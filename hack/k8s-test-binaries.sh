#!/usr/bin/env bash
# k8s-test-binaries.sh builds the real Kubernetes control-plane binaries that the
# integration tests run (pkg/test/kubeenv): kube-apiserver, kube-controller-manager,
# kube-scheduler and etcd, at pinned versions, from the Go module proxy, into a versioned cache
# folder outside the repository:
#
#   ${INFERMESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infermesh}/k8s/<K8S_VERSION>/bin/
#
# It prints that folder (the one holding bin/) as its only, so last, line of
# stdout; every other message goes to stderr. Tests find the folder by
# themselves, or through KUBE_TEST_BINARIES=<folder>/bin.
#
# How: `go install k8s.io/kubernetes/cmd/...@v1.37.2` cannot work, because
# k8s.io/kubernetes requires its staging modules at v0.0.0 with replace
# directives pointing into its own tree. So the script generates a throwaway
# module that requires k8s.io/kubernetes and replaces every staging module named
# in that release's go.mod with the same module at the matching v0.X.Y tag. The
# list, the go directive, the godebug settings and the etcd version are all read
# from the downloaded go.mod, so nothing here can drift from the release.
#
# Reuse: when every binary is present and answers --version, nothing is built;
# otherwise only the binaries that are missing or do not run are built (a folder
# cached before kube-scheduler was added gets just the scheduler). A build goes
# into a temporary folder beside the cache folder. When there is no cache folder
# yet, the whole folder is renamed into place at the end; otherwise each new
# binary is renamed into the existing bin/ (one rename per file), so a killed
# build never leaves a half-written binary or a half-filled new folder.
# Concurrent runs serialise on a lock file (flock); the second one finds the
# folder complete and reuses it.
#
# Cost, measured on the 2-core machine with an empty Go build cache: 11.5 minutes
# (kube-apiserver 438 s, kube-controller-manager 216 s, etcd 24 s, module
# resolution the rest), 3.6 GB of Go build cache, 238 MB of binaries. With a
# warm Go build cache a rebuild takes about 10 s; reusing the folder, 0.1 s.
# kube-scheduler, added later, shares all but 6 of its packages with the
# others: 27 s to add it to a cached folder, 81 MB (architecture/ci.md).
#
# Environment:
#   INFERMESH_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/infermesh)
#   K8S_VERSION      Kubernetes release to build (default v1.37.2)
#   GO               go command (default go)
set -euo pipefail
# Go 1.27 (Gateway API v1.7.0 needs it): the toolchain the module proxy
# serves, fetched by the go command on first use (README).
export GOTOOLCHAIN=go1.27.3

K8S_VERSION=${K8S_VERSION:-v1.37.2}
GO=${GO:-go}
CACHE_ROOT=${INFERMESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infermesh}
DEST=$CACHE_ROOT/k8s/$K8S_VERSION
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler etcd)

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'k8s-test-binaries: %s\n' "$*" >&2; exit 1; }

[[ $K8S_VERSION =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "K8S_VERSION must look like v1.37.2, got $K8S_VERSION"
# Kubernetes v1.X.Y publishes its staging modules (k8s.io/api, ...) as v0.X.Y.
STAGING_VERSION=v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}

# runs FILE: true when FILE exists and answers --version.
runs() { [[ -x $1 ]] && "$1" --version >/dev/null 2>&1; }

# complete DIR: true when every binary in DIR/bin exists and runs.
complete() {
	local b
	for b in "${BINARIES[@]}"; do
		runs "$1/bin/$b" || return 1
	done
}

mkdir -p "$CACHE_ROOT/k8s"
exec 9>"$CACHE_ROOT/k8s/.$K8S_VERSION.lock"
if ! flock -n 9; then
	log "waiting for another k8s-test-binaries.sh building $K8S_VERSION"
	flock 9
fi

if complete "$DEST"; then
	log "reusing $DEST"
	printf '%s\n' "$DEST"
	exit 0
fi

# The binaries to build: those missing from, or not running in, the cache folder.
MISSING=()
for b in "${BINARIES[@]}"; do
	runs "$DEST/bin/$b" || MISSING+=("$b")
done
log "building ${MISSING[*]} into $DEST"

# We hold the lock, so any leftover build folder is from a killed run.
rm -rf "$CACHE_ROOT/k8s/.build-$K8S_VERSION".*
WORK=$(mktemp -d "$CACHE_ROOT/k8s/.build-$K8S_VERSION.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
MOD=$WORK/mod
OUT=$WORK/out
mkdir -p "$MOD" "$OUT/bin"

# The release's own go.mod: go list -m fetches only the .mod file, not the zip.
KMOD=$(cd "$MOD" && GOFLAGS=-mod=mod "$GO" list -m -f '{{.GoMod}}' "k8s.io/kubernetes@$K8S_VERSION")
[[ -s $KMOD ]] || die "could not fetch the go.mod of k8s.io/kubernetes@$K8S_VERSION"

mapfile -t STAGING < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$KMOD" | sort -u)
((${#STAGING[@]} > 0)) || die "no staging replace directives found in $KMOD"
GO_DIRECTIVE=$(awk '$1 == "go" && NF == 2 { print $2; exit }' "$KMOD")
ETCD_VERSION=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$KMOD")
[[ -n $GO_DIRECTIVE && -n $ETCD_VERSION ]] || die "could not read the go directive or the etcd version from $KMOD"
log "k8s.io/kubernetes $K8S_VERSION: ${#STAGING[@]} staging modules at $STAGING_VERSION, etcd $ETCD_VERSION, go $GO_DIRECTIVE"

{
	echo "// Generated by hack/k8s-test-binaries.sh; throwaway."
	echo "module infermesh.test/k8s-test-binaries"
	echo
	echo "go $GO_DIRECTIVE"
	echo
	# godebug settings apply only from the main module: carry the release's over.
	awk '/^godebug \(/ { block = 1 } block || /^godebug / { print } block && /^\)/ { block = 0 }' "$KMOD"
	echo
	echo "require ("
	echo "	k8s.io/kubernetes $K8S_VERSION"
	echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
	echo ")"
	echo
	echo "replace ("
	for m in "${STAGING[@]}"; do
		echo "	$m => $m $STAGING_VERSION"
	done
	echo ")"
} >"$MOD/go.mod"
cat >"$MOD/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
EOF

log "resolving modules (go mod tidy)"
(cd "$MOD" && GOFLAGS=-mod=mod "$GO" mod tidy) >&2
GOT_ETCD=$(cd "$MOD" && "$GO" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
[[ $GOT_ETCD == "$ETCD_VERSION" ]] || die "etcd resolved to $GOT_ETCD, want $ETCD_VERSION"

MINOR=${K8S_VERSION#v1.}
MINOR=${MINOR%%.*}
VPKG=k8s.io/component-base/version
LDFLAGS="-s -w -X $VPKG.gitVersion=$K8S_VERSION -X $VPKG.gitMajor=1 -X $VPKG.gitMinor=$MINOR -X $VPKG.gitTreeState=clean"

declare -A PKG=(
	[kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
	[kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
	[kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
	[etcd]=go.etcd.io/etcd/server/v3
)
total_start=$SECONDS
for b in "${MISSING[@]}"; do
	start=$SECONDS
	log "building $b (${PKG[$b]})"
	(cd "$MOD" && CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" build -trimpath -buildvcs=false -ldflags "$LDFLAGS" -o "$OUT/bin/$b" "${PKG[$b]}") >&2
	log "built $b in $((SECONDS - start)) s"
done
log "built all in $((SECONDS - total_start)) s"

for b in "${MISSING[@]}"; do
	runs "$OUT/bin/$b" || die "the fresh $OUT/bin/$b does not run --version"
done
{
	echo "kubernetes $K8S_VERSION"
	echo "staging $STAGING_VERSION"
	echo "etcd $ETCD_VERSION"
	"$GO" version
} >"$OUT/VERSIONS"

if [[ -d $DEST/bin ]]; then
	# Complete the existing folder: one rename per new binary, on the same
	# filesystem, so the binaries that already run are neither rebuilt nor moved.
	for b in "${MISSING[@]}"; do
		mv -f "$OUT/bin/$b" "$DEST/bin/$b"
	done
	mv -f "$OUT/VERSIONS" "$DEST/VERSIONS"
else
	rm -rf "$DEST"
	mv "$OUT" "$DEST"
fi
complete "$DEST" || die "$DEST/bin is still incomplete"
log "binaries in $DEST/bin"
printf '%s\n' "$DEST"
