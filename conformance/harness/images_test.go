// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build conformance

package harness

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/infermesh/infermesh/pkg/test/node"
)

// readImages reads hack/images.sh's images.tsv: one "reference TAB binary"
// line per image. Each binary runs as its image's entrypoint, with no CMD
// or ENV of its own: the suite's pods and ours give their args explicitly.
func readImages(path string) (map[string]node.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("image map: %w (hack/images.sh writes it)", err)
	}
	defer f.Close()
	out := map[string]node.Image{}
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		ref, bin, ok := strings.Cut(s.Text(), "\t")
		if !ok || ref == "" || bin == "" {
			return nil, fmt.Errorf("image map %s line %d: want \"reference<TAB>binary\", got %q", path, n, s.Text())
		}
		out[ref] = node.Image{Binary: bin}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("image map %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("image map %s is empty", path)
	}
	return out, nil
}
