#!/usr/bin/env bash
# images.sh builds the binaries that stand for container images when pods run
# as local processes (the node agent, pkg/test/node, maps each pod's image to one),
# and writes that map. Pinned builds, from the Go module proxy, each into a
# versioned cache folder outside the repository:
#
#   echo-basic           sigs.k8s.io/gateway-api-conformance-images@$ECHO_VERSION,
#                        package .../echo-basic: the backend of the Gateway API
#                        and GIE conformance suites (its source moved there from
#                        sigs.k8s.io/gateway-api/conformance after v1.6; v0.1.0 is
#                        the image tag Gateway API v1.7.0's base manifests name)
#   gie-conformance.test `go test -c` of sigs.k8s.io/gateway-api-inference-extension/conformance
#                        @$GIE_CONFORMANCE_VERSION: the GIE suite's own test binary
#                        (SUITE=gie, the default)
#   gwapi-conformance.test
#                        `go test -c` of sigs.k8s.io/gateway-api/conformance
#                        @$GWAPI_CONFORMANCE_VERSION: the Gateway API suite's own
#                        test binary (SUITE=gateway-api), with tests.tsv beside
#                        bin/: the suite's tests and profiles as
#                        conformance/harness/testlist prints them, built in the
#                        same throwaway module. v1.7.0 requires
#                        sigs.k8s.io/gateway-api-conformance-images v0.2.0 (its
#                        gRPC echo client), which the module proxy refuses; the
#                        throwaway module replaces it with $ECHO_VERSION (v0.1.0),
#                        whose packages the suite compiles against unchanged
#                        (conformance/README.md)
#   coredns              github.com/coredns/coredns at the version of the
#                        coredns image the Gateway API suite's base manifest
#                        names, only when it names one (v1.12.2 for v1.6.1;
#                        v1.7.0 names none; SUITE=gateway-api)
#
#   ${INFERMESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infermesh}/images/<name>-<version>/bin/<name>
#
# lwepp ($LWEPP_VERSION) is hack/epp-binaries.sh's build, reused where that
# script caches it (epp/lwepp-<version>/bin/lwepp), never rebuilt here. It
# runs under the lwepp image reference the GIE suite's own manifests name
# (conformance/resources of $GIE_CONFORMANCE_VERSION: lwepp:v1.6.0), whatever
# LWEPP_VERSION is: the suite's v1.6.2 release only moved that reference to
# lwepp:v1.6.2 (conformance/README.md, "GIE").
#
# Our own binaries are built from the repository this script is in, at its
# working tree, whenever that changed since the last build (commit, changes,
# untracked files, Go version: see STAMP): pilot-discovery (./pilot/cmd/pilot-discovery) and the test data
# plane's command (./pkg/test/dataplane/cmd/dataplane). They go into a folder
# keyed by the repository's path, so two checkouts never overwrite each other's:
#
#   .../images/local-<first 12 hex of sha256(repository path)>/
#       bin/pilot-discovery, bin/dataplane
#       images.tsv
#
# That folder is printed as the only, so last, line of stdout; every other
# message goes to stderr. images.tsv holds one line per image, the image
# reference, a TAB, and the absolute path of the binary that runs as its
# entrypoint; no header, no comments:
#
#   gcr.io/k8s-staging-gateway-api/echo-basic:v20251106-v1.3.0-263-g47c3435c  .../echo-basic
#   registry.k8s.io/gateway-api-inference-extension/lwepp:v1.6.0               .../lwepp-v1.6.2/bin/lwepp (SUITE=gie)
#   registry.k8s.io/gateway-api/conformance/echo-basic:v0.1.0                  .../echo-basic (SUITE=gateway-api; one line
#                                                                                  per echo-basic reference in the suite's manifests)
#   registry.k8s.io/coredns/coredns:v1.12.2                                    .../coredns    (SUITE=gateway-api, suites before v1.7)
#   ghcr.io/infermesh/pilot-discovery:latest                                    .../pilot-discovery
#   docker.io/envoyproxy/envoy:distroless-v1.40.0                               .../dataplane
#
# The echo-basic, lwepp and coredns references are the ones the suites'
# manifests name; every echo-basic tag runs the one echo-basic build (the
# conformance-images v0.1.0 source serves every mode the tagged images do:
# HTTP, h2c, HTTPS, gRPC, TCP and UDP echo). Ours are the
# references an unmodified install uses: pilot-discovery's is the image in
# manifests/20-deployment.yaml, and the Gateway data plane's is the default of
# PILOT_GATEWAY_PROXY_IMAGE (pilot/pkg/features/features.go), the image our
# Gateway controller gives every Gateway Deployment. Both are read from those
# files, so the map cannot drift from them. That Envoy image runs the test data
# plane (pkg/test/dataplane), a stand-in for Envoy started with Envoy's own
# arguments; with ENVOY_BINARY=<path of an envoy binary> it runs that Envoy
# instead. An image missing from the map is the node agent's to refuse.
#
# Reuse: a pinned binary that is present and checks out (`go version -m` names
# the package and the module version asked for) is not rebuilt. A build goes
# into a temporary folder beside its cache folder and is renamed into place at
# the end, so a killed build never leaves a half-filled folder; our own
# binaries and images.tsv are each replaced by one rename. Concurrent runs
# serialise on lock files (flock).
#
# Cost: see architecture/ci.md.
#
# Environment:
#   INFERMESH_CACHE            cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/infermesh)
#   ECHO_VERSION               sigs.k8s.io/gateway-api-conformance-images release for echo-basic
#                              (default v0.1.0)
#   SUITE                      gie (default) or gateway-api: which suite's binaries to build
#   GIE_CONFORMANCE_VERSION    GIE release of the conformance suite (default v1.6.0: the
#                              module proxy serves no later conformance module)
#   GWAPI_CONFORMANCE_VERSION  Gateway API release of its conformance suite (default v1.7.0)
#   LWEPP_VERSION              GIE release of lwepp (default v1.6.2, built by
#                              hack/epp-binaries.sh with EPP_BUILD_ONLY=lwepp: the
#                              integration suites' lwepp stays hack/epp-binaries.sh's default)
#   ENVOY_BINARY               an Envoy binary to run for the Gateway data-plane image
#   GO                         go command (default go)
set -euo pipefail
# Go 1.27 (Gateway API v1.7.0 needs it): the toolchain the module proxy
# serves, fetched by the go command on first use (README).
export GOTOOLCHAIN=go1.27.3

ECHO_VERSION=${ECHO_VERSION:-v0.1.0}
SUITE=${SUITE:-gie}
GWAPI_CONFORMANCE_VERSION=${GWAPI_CONFORMANCE_VERSION:-v1.7.0}
GIE_CONFORMANCE_VERSION=${GIE_CONFORMANCE_VERSION:-v1.6.0}
LWEPP_VERSION=${LWEPP_VERSION:-v1.6.2}
GO=${GO:-go}
CACHE_ROOT=${INFERMESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infermesh}
ROOT=$CACHE_ROOT/images
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

# The echo-basic image the GIE suite's manifests name (v1.6.0 conformance/resources).
ECHO_IMAGE=gcr.io/k8s-staging-gateway-api/echo-basic:v20251106-v1.3.0-263-g47c3435c

GWAPI=sigs.k8s.io/gateway-api
GIE=sigs.k8s.io/gateway-api-inference-extension
ECHO_MODULE=sigs.k8s.io/gateway-api-conformance-images

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'images: %s\n' "$*" >&2; exit 1; }

[[ $SUITE == gie || $SUITE == gateway-api ]] || die "SUITE must be gie or gateway-api, got $SUITE"
for v in "$ECHO_VERSION" "$GIE_CONFORMANCE_VERSION" "$LWEPP_VERSION" "$GWAPI_CONFORMANCE_VERSION"; do
	[[ $v =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "versions must look like v1.6.0, got $v"
done

# built BIN PKG MODULE VERSION: true when BIN exists and its build information
# names package PKG as its main package (for a test binary, PKG.test) and
# MODULE at VERSION among its modules.
built() {
	[[ -x $1 ]] || return 1
	local info
	info=$("$GO" version -m "$1" 2>/dev/null) || return 1
	awk -v pkg="$2" '$1 == "path" && ($2 == pkg || $2 == pkg ".test") { found = 1 } END { exit !found }' <<<"$info" &&
		awk -v mod="$3" -v ver="$4" '($1 == "mod" || $1 == "dep") && $2 == mod && $3 == ver { found = 1 } END { exit !found }' <<<"$info"
}

# lock NAME: serialise on ROOT/.NAME.lock (fd 9) until unlock.
lock() {
	exec 9>"$ROOT/.$1.lock"
	if ! flock -n 9; then
		log "waiting for another images.sh building $1"
		flock 9
	fi
}
unlock() { exec 9>&-; }

# throwaway_module DIR NAME IMPORT REQUIRE...: a module in DIR named for NAME
# whose tools.go imports IMPORT and whose go.mod requires each "module version"
# in REQUIRE; the go directive and the one-line replace directives that do not
# point into the release's own tree come from the go.mod of the first one
# (replace directives apply only in the main module).
throwaway_module() {
	local dir=$1 name=$2 import=$3
	shift 3
	local mod ver gomod godirective
	read -r mod ver <<<"$1"
	gomod=$(cd "$dir" && GOFLAGS=-mod=mod "$GO" list -m -f '{{.GoMod}}' "$mod@$ver")
	[[ -s $gomod ]] || die "could not fetch the go.mod of $mod@$ver"
	godirective=$(awk '$1 == "go" && NF == 2 { print $2; exit }' "$gomod")
	[[ -n $godirective ]] || die "no go directive in $gomod"
	{
		echo "// Generated by hack/images.sh; throwaway."
		echo "module infermesh.test/images/$name"
		echo
		echo "go $godirective"
		echo
		local r
		for r in "$@"; do echo "require $r"; done
		echo
		awk '$1 == "replace" && $3 == "=>" && $4 !~ /^\.\.?\// { print }' "$gomod"
		# EXTRA_REPLACE: "module => module version" lines the caller adds.
		[[ -z ${EXTRA_REPLACE:-} ]] || printf 'replace %s\n' "$EXTRA_REPLACE"
	} >"$dir/go.mod"
	printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$import" >"$dir/tools.go"
	(cd "$dir" && GOFLAGS=-mod=mod "$GO" mod tidy) >&2
}

# build NAME VERSION PKG MODULE KIND REQUIRE...: make sure
# ROOT/NAME-VERSION/bin/NAME exists and is PKG from MODULE at VERSION; KIND is
# "build" for a command, "test" for `go test -c` of the package. With
# POST_BUILD set to "FUNCTION FILE", FUNCTION MODDIR OUTDIR runs after the
# build in its throwaway module and must leave OUTDIR/FILE, which a reuse
# then requires too.
build() {
	local name=$1 version=$2 pkg=$3 module=$4 kind=$5
	shift 5
	local dest=$ROOT/$name-$version post=()
	read -r -a post <<<"${POST_BUILD:-}"
	lock "$name-$version"
	if built "$dest/bin/$name" "$pkg" "$module" "$version" && [[ ${#post[@]} == 0 || -s $dest/${post[1]} ]]; then
		log "reusing $dest"
		unlock
		return
	fi
	rm -rf "$ROOT/.build-$name-$version".*
	local work
	work=$(mktemp -d "$ROOT/.build-$name-$version.XXXXXX")
	# shellcheck disable=SC2064 # expand now: work is local
	trap "rm -rf '$work'" EXIT
	mkdir -p "$work/mod" "$work/out/bin"
	log "$name: resolving modules for $module $version"
	throwaway_module "$work/mod" "$name" "$pkg" "$@"

	local start=$SECONDS flags=(-trimpath -buildvcs=false -ldflags "-s -w" -o "$work/out/bin/$name")
	log "$name: go $kind $pkg"
	if [[ $kind == test ]]; then
		(cd "$work/mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" test -c "${flags[@]}" "$pkg") >&2
	else
		(cd "$work/mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" build "${flags[@]}" "$pkg") >&2
	fi
	log "$name: built in $((SECONDS - start)) s"
	built "$work/out/bin/$name" "$pkg" "$module" "$version" ||
		die "the fresh $work/out/bin/$name is not $pkg from $module $version"
	if [[ ${#post[@]} != 0 ]]; then
		"${post[0]}" "$work/mod" "$work/out"
		[[ -s $work/out/${post[1]} ]] || die "$name: ${post[0]} left no ${post[1]}"
	fi
	{
		echo "$module $version"
		echo "package $pkg ($kind)"
		"$GO" version
	} >"$work/out/VERSIONS"
	cp "$work/mod/go.mod" "$work/out/go.mod.txt"
	rm -rf "$dest"
	mv "$work/out" "$dest"
	rm -rf "$work"
	trap - EXIT
	unlock
	log "$name: binary in $dest/bin"
}

# read_image WHAT FILE FS AWK: the image reference AWK, with field separator
# FS, prints from FILE.
read_image() {
	local ref
	ref=$(awk -F "$3" "$4" "$REPO/$2")
	[[ $ref =~ ^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9./_-]+:[A-Za-z0-9._-]+$ ]] || die "could not read $1 from $2 (got '$ref')"
	printf '%s\n' "$ref"
}

# test_list MODDIR OUTDIR: OUTDIR/tests.tsv, the Gateway API suite's tests
# and profiles, printed by conformance/harness/testlist run in the suite's
# throwaway module (the same module versions as the suite binary).
test_list() {
	cp "$REPO/conformance/harness/testlist/main.go" "$1/testlist.go"
	(cd "$1" && CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" run -trimpath testlist.go) >"$2/tests.tsv"
	grep -q '^profile	GATEWAY-HTTP	core	' "$2/tests.tsv" && grep -q '^test	' "$2/tests.tsv" ||
		die "testlist printed no GATEWAY-HTTP profile or no test"
}

# module_dir MODULE VERSION: the module's folder in the module cache
# (downloaded if missing).
module_dir() {
	local dir
	dir=$(cd "$ROOT" && GOFLAGS=-mod=mod "$GO" mod download -json "$1@$2" | awk -F'"' '$2 == "Dir" { print $4; exit }')
	[[ -d $dir ]] || die "could not download $1@$2"
	printf '%s\n' "$dir"
}

mkdir -p "$ROOT"

build echo-basic "$ECHO_VERSION" "$ECHO_MODULE/echo-basic" "$ECHO_MODULE" build "$ECHO_MODULE $ECHO_VERSION"
ECHO=$ROOT/echo-basic-$ECHO_VERSION/bin/echo-basic
if [[ $SUITE == gie ]]; then
	build gie-conformance.test "$GIE_CONFORMANCE_VERSION" "$GIE/conformance" "$GIE/conformance" test \
		"$GIE/conformance $GIE_CONFORMANCE_VERSION" "$GIE $GIE_CONFORMANCE_VERSION"
	# The lwepp reference the suite's manifests name; lwepp $LWEPP_VERSION runs under it.
	GIE_DIR=$(module_dir "$GIE/conformance" "$GIE_CONFORMANCE_VERSION")
	LWEPP_IMAGE=$(grep -rhoE 'image: *"?[a-z0-9.-]+/[a-z0-9./_-]*/lwepp:v[0-9]+\.[0-9]+\.[0-9]+' "$GIE_DIR/resources" |
		sed -E 's/^image: *"?//' | sort -u)
	[[ $LWEPP_IMAGE =~ ^[^[:space:]]+$ ]] || die "want one lwepp image in $GIE_DIR/resources, got '$LWEPP_IMAGE'"
	log "lwepp $LWEPP_VERSION runs as $LWEPP_IMAGE (the reference the GIE $GIE_CONFORMANCE_VERSION suite names)"
	LWEPP=$CACHE_ROOT/epp/lwepp-$LWEPP_VERSION/bin/lwepp
	if [[ ! -x $LWEPP ]]; then
		log "lwepp $LWEPP_VERSION is not cached yet: hack/epp-binaries.sh builds it"
		EPP_BUILD_ONLY=lwepp LWEPP_VERSION=$LWEPP_VERSION "$REPO/hack/epp-binaries.sh" >/dev/null
	fi
	[[ -x $LWEPP ]] || die "hack/epp-binaries.sh left no $LWEPP"
else
	GWAPI_DIR=$(module_dir "$GWAPI/conformance" "$GWAPI_CONFORMANCE_VERSION")
	# v1.7.0 on requires the conformance images' module (its gRPC and UDP
	# echo clients) at a version the module proxy may refuse: use ours.
	extra=
	if awk -v m="$ECHO_MODULE" '$1 == m || ($1 == "require" && $2 == m) { found = 1 } END { exit !found }' "$GWAPI_DIR/go.mod"; then
		extra="$ECHO_MODULE => $ECHO_MODULE $ECHO_VERSION"
	fi
	EXTRA_REPLACE=$extra POST_BUILD="test_list tests.tsv" build gwapi-conformance.test "$GWAPI_CONFORMANCE_VERSION" \
		"$GWAPI/conformance" "$GWAPI/conformance" test "$GWAPI/conformance $GWAPI_CONFORMANCE_VERSION" \
		"$GWAPI $GWAPI_CONFORMANCE_VERSION"
	# The images the suite's manifests name: every echo-basic tag, and coredns
	# (base/manifests.yaml, suites before v1.7), built at that tag from its module.
	mapfile -t GWAPI_ECHO_IMAGES < <(grep -rhoE 'image: *"?[a-z0-9.-]+/[a-z0-9./_-]*/echo-basic:[A-Za-z0-9._-]+' \
		"$GWAPI_DIR/base" "$GWAPI_DIR/tests" | sed -E 's/^image: *"?//' | sort -u)
	[[ ${#GWAPI_ECHO_IMAGES[@]} -gt 0 ]] || die "no echo-basic image in $GWAPI_DIR's manifests"
	COREDNS_IMAGE=$(awk '$1 == "image:" && $2 ~ /\/coredns\/coredns:v[0-9]/ { print $2; exit }' "$GWAPI_DIR/base/manifests.yaml")
	if [[ -n $COREDNS_IMAGE ]]; then
		COREDNS_VERSION=${COREDNS_IMAGE##*:}
		[[ $COREDNS_VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "could not read coredns's version from $COREDNS_IMAGE"
		build coredns "$COREDNS_VERSION" github.com/coredns/coredns github.com/coredns/coredns build \
			"github.com/coredns/coredns $COREDNS_VERSION"
	else
		log "the suite's base manifests name no coredns image: none built"
	fi
fi

PILOT_IMAGE=$(read_image "pilot-discovery's image" manifests/20-deployment.yaml ' ' \
	'$1 == "image:" && $2 ~ /\/pilot-discovery:/ { print $2; exit }')
# stringFlag("PILOT_GATEWAY_PROXY_IMAGE", "<default>", ...: the second string.
PROXY_IMAGE=$(read_image "PILOT_GATEWAY_PROXY_IMAGE's default" pilot/pkg/features/features.go '"' \
	'$2 == "PILOT_GATEWAY_PROXY_IMAGE" { print $4; exit }')
if [[ -n ${ENVOY_BINARY:-} ]]; then
	[[ -f $ENVOY_BINARY && -x $ENVOY_BINARY ]] || die "ENVOY_BINARY=$ENVOY_BINARY is not an executable file"
	"$ENVOY_BINARY" --version >/dev/null 2>&1 || die "ENVOY_BINARY=$ENVOY_BINARY does not answer --version"
	ENVOY_BINARY=$(cd "$(dirname "$ENVOY_BINARY")" && pwd -P)/$(basename "$ENVOY_BINARY")
fi

# Our own binaries and the map, in the folder of this checkout.
KEY=$(printf '%s' "$REPO" | sha256sum | cut -c1-12)
LOCAL=$ROOT/local-$KEY
lock "local-$KEY"
mkdir -p "$LOCAL/bin"
rm -rf "$LOCAL/.build".*
WORK=$(mktemp -d "$LOCAL/.build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# The source state our binaries are built from: commit, uncommitted changes
# (untracked files included) and Go version. Equal to the stamp of the last
# build, the binaries are reused (go build relinks every time, which costs
# 10 to 45 s here).
STAMP=$( (cd "$REPO" && git rev-parse HEAD && git status --porcelain=v1 --untracked-files=all &&
	git diff HEAD --binary && git ls-files --others --exclude-standard -z | xargs -0r sha256sum && "$GO" version) | sha256sum | cut -c1-64)
if [[ -x $LOCAL/bin/pilot-discovery && -x $LOCAL/bin/dataplane && $(cat "$LOCAL/STAMP" 2>/dev/null) == "$STAMP" ]]; then
	log "reusing pilot-discovery and dataplane in $LOCAL/bin (sources unchanged)"
else
	for cmd in pilot-discovery:./pilot/cmd/pilot-discovery dataplane:./pkg/test/dataplane/cmd/dataplane; do
		name=${cmd%%:*}
		start=$SECONDS
		# Plain go build, as `make build` and the integration suites compile:
		# they share the Go build cache.
		(cd "$REPO" && "$GO" build -o "$WORK/$name" "${cmd#*:}") >&2
		mv -f "$WORK/$name" "$LOCAL/bin/$name"
		log "$name: built from $REPO in $((SECONDS - start)) s"
	done
	printf '%s\n' "$STAMP" >"$WORK/STAMP"
	mv -f "$WORK/STAMP" "$LOCAL/STAMP"
fi
{
	printf '%s\t%s\n' "$ECHO_IMAGE" "$ECHO"
	if [[ $SUITE == gie ]]; then
		printf '%s\t%s\n' "$LWEPP_IMAGE" "$LWEPP"
	else
		for ref in "${GWAPI_ECHO_IMAGES[@]}"; do
			[[ $ref == "$ECHO_IMAGE" ]] || printf '%s\t%s\n' "$ref" "$ECHO"
		done
		[[ -z $COREDNS_IMAGE ]] || printf '%s\t%s\n' "$COREDNS_IMAGE" "$ROOT/coredns-$COREDNS_VERSION/bin/coredns"
	fi
	printf '%s\t%s\n' "$PILOT_IMAGE" "$LOCAL/bin/pilot-discovery"
	printf '%s\t%s\n' "$PROXY_IMAGE" "${ENVOY_BINARY:-$LOCAL/bin/dataplane}"
} >"$WORK/images.tsv"
mv -f "$WORK/images.tsv" "$LOCAL/images.tsv"
printf '%s\n' "$REPO" >"$LOCAL/REPOSITORY"
unlock
log "image map in $LOCAL/images.tsv"
printf '%s\n' "$LOCAL"
