// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Image is what the node runs for one image reference: a binary on the host
// that plays the image's ENTRYPOINT, with the image's CMD and ENV.
type Image struct {
	// Binary is the host path of the executable.
	Binary string
	// Entrypoint is the path the image's ENTRYPOINT names inside the image,
	// such as "/echo-basic"; a container command whose first word is this
	// path, or Binary's base name, runs Binary. Empty means "/" + Binary's
	// base name.
	Entrypoint string
	// Cmd is the image's CMD: the arguments used when the container gives
	// neither command nor args.
	Cmd []string
	// Env is the image's ENV, as NAME=value; the container's env wins.
	Env []string
}

// errImageNotKnown reports an image reference that is not in Config.Images.
type errImageNotKnown struct {
	image string
	known []string
}

func (e errImageNotKnown) Error() string {
	return fmt.Sprintf("image %q is not in the node's image map (known: %s)", e.image, strings.Join(e.known, ", "))
}

// lookupImage returns the Image for ref, or an errImageNotKnown.
func lookupImage(images map[string]Image, ref string) (Image, error) {
	if img, ok := images[ref]; ok {
		return img, nil
	}
	known := make([]string, 0, len(images))
	for k := range images {
		known = append(known, k)
	}
	slices.Sort(known)
	return Image{}, errImageNotKnown{image: ref, known: known}
}

// argv returns the process's arguments as a container runtime builds them
// from the image config and the container (after $(VAR) expansion of command
// and args): command replaces ENTRYPOINT and drops CMD; args alone replace
// CMD. argv[0] is Binary, since the image holds only that one executable; a
// command whose first word names anything else is an error (the runtime's
// "executable file not found").
func (img Image) argv(c *corev1.Container, command, args []string) ([]string, error) {
	entry := img.Entrypoint
	if entry == "" {
		entry = "/" + filepath.Base(img.Binary)
	}
	if len(command) == 0 {
		if len(args) == 0 && c.Args == nil {
			args = img.Cmd
		}
		return append([]string{img.Binary}, args...), nil
	}
	first := command[0]
	if first != entry && first != filepath.Base(img.Binary) && path.Clean(first) != entry {
		return nil, fmt.Errorf("exec: %q: executable file not found in image %q (it holds only %s)", first, c.Image, entry)
	}
	out := append([]string{img.Binary}, command[1:]...)
	return append(out, args...), nil
}
