// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package krt

// CollectionOption configures a collection at construction.
type CollectionOption func(*collectionOptions)

type collectionOptions struct {
	name     string
	stop     <-chan struct{}
	debugger *DebugHandler
}

// WithName names the collection in logs, metrics and the debug dump. Without
// it the name is derived from the element type.
func WithName(name string) CollectionOption {
	return func(o *collectionOptions) { o.name = name }
}

// WithStop ties the collection's lifetime to stop: when it closes, the
// collection's goroutine exits and it unregisters from every collection it
// registered on, and every handler registered on it is released.
func WithStop(stop <-chan struct{}) CollectionOption {
	return func(o *collectionOptions) { o.stop = stop }
}

// WithDebugging adds the collection to h, which serves the debug dump (the
// JSON behind /debug/krtz). A nil h is ignored.
func WithDebugging(h *DebugHandler) CollectionOption {
	return func(o *collectionOptions) { o.debugger = h }
}

func buildOptions(defaultName string, opts []CollectionOption) collectionOptions {
	var o collectionOptions
	for _, f := range opts {
		f(&o)
	}
	if o.name == "" {
		o.name = defaultName
	}
	return o
}
