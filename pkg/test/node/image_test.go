// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestImageArgvAsARuntimeBuildsIt(t *testing.T) {
	img := Image{Binary: "/cache/bin/echo-basic", Cmd: []string{"--default"}}
	for _, tc := range []struct {
		name          string
		command, args []string
		want          []string
		wantErr       bool
	}{
		{name: "neither: ENTRYPOINT and CMD", want: []string{"/cache/bin/echo-basic", "--default"}},
		{name: "args replace CMD", args: []string{"-x"}, want: []string{"/cache/bin/echo-basic", "-x"}},
		{name: "command replaces ENTRYPOINT and drops CMD", command: []string{"/echo-basic", "-a"}, want: []string{"/cache/bin/echo-basic", "-a"}},
		{name: "command and args", command: []string{"echo-basic"}, args: []string{"-b"}, want: []string{"/cache/bin/echo-basic", "-b"}},
		{name: "a command the image lacks", command: []string{"/bin/sh", "-c", "x"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Image: "echo", Command: tc.command, Args: tc.args}
			got, err := img.argv(c, tc.command, tc.args)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Fatalf("argv = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestUnknownImageNamesTheImage(t *testing.T) {
	_, err := lookupImage(map[string]Image{"known:v1": {}}, "missing:v2")
	var unknown errImageNotKnown
	if !errors.As(err, &unknown) || err.Error() != `image "missing:v2" is not in the node's image map (known: known:v1)` {
		t.Fatalf("err = %v", err)
	}
}
