// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package bootstrap

import (
	"log/slog"
	"reflect"
	"testing"

	"github.com/infermesh/infermesh/pilot/pkg/config/file"
)

// TestFileInputsComplete: FileInputs gives the controller every collection
// gateway.Inputs has, so a kind the controller learns to read (a field
// added to gateway.Inputs) cannot be left out of file mode while status -f
// and check -f report it, as ListenerSets once were.
func TestFileInputsComplete(t *testing.T) {
	src, err := file.New(t.TempDir(), file.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	in := reflect.ValueOf(FileInputs(src))
	if in.NumField() < 12 {
		t.Fatalf("gateway.Inputs has %d fields; this test expects the 12 it was written for, or more", in.NumField())
	}
	for i := range in.NumField() {
		if f := in.Field(i); f.Kind() != reflect.Interface || f.IsNil() {
			t.Errorf("FileInputs leaves gateway.Inputs.%s unset (file mode would not read it, status -f neither)", in.Type().Field(i).Name)
		}
	}
}
