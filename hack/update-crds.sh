#!/usr/bin/env bash
# update-crds.sh copies the CRD manifests that file mode (pilot/pkg/config/file)
# validates against into pilot/pkg/config/file/crds/, where go:embed picks them
# up: the binary runs without a module cache, so it carries its own copies.
#
# Sources, at the versions go.mod requires:
#   sigs.k8s.io/gateway-api                     config/crd/standard/*.yaml
#   sigs.k8s.io/gateway-api-inference-extension config/crd/bases/inference.networking.k8s.io_inferencepools.yaml
# Files whose documents are not all CustomResourceDefinitions (the Gateway API's
# ValidatingAdmissionPolicy for safe upgrades) are skipped.
#
# Rerun after bumping either module in go.mod: TestEmbeddedCRDsMatchModules
# fails until the copies match the module's files byte for byte.
set -euo pipefail
# Go 1.27 (Gateway API v1.7.0 needs it): the toolchain the module proxy
# serves, fetched by the go command on first use (README).
export GOTOOLCHAIN=go1.27.3

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="pilot/pkg/config/file/crds"

moddir() {
  local dir
  dir="$(go list -mod=mod -m -f '{{.Dir}}' "$1")"
  if [[ -z "$dir" ]]; then
    go mod download "$1"
    dir="$(go list -mod=mod -m -f '{{.Dir}}' "$1")"
  fi
  echo "$dir"
}

# only_crds FILE: true when every document of FILE is a CustomResourceDefinition.
only_crds() {
  local kinds crds
  kinds="$(grep -c '^kind:' "$1" || true)"
  crds="$(grep -c '^kind: CustomResourceDefinition$' "$1" || true)"
  [[ "$kinds" -gt 0 && "$kinds" == "$crds" ]]
}

gateway="$(moddir sigs.k8s.io/gateway-api)"
inference="$(moddir sigs.k8s.io/gateway-api-inference-extension)"

rm -rf "$out"
mkdir -p "$out"
for f in "$gateway"/config/crd/standard/*.yaml \
         "$inference"/config/crd/bases/inference.networking.k8s.io_inferencepools.yaml; do
  if only_crds "$f"; then
    install -m 0644 "$f" "$out/$(basename "$f")"
  else
    echo "update-crds: skipping $(basename "$f"): not only CustomResourceDefinitions" >&2
  fi
done
ls "$out"
