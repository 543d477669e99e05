// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
)

// UpdateShared performs one read-modify-write of status on a shared object:
// get reads the live object (a cached copy is fine for the first attempt:
// a stale one fails the update with a conflict, and get must then read the
// API server so the resourceVersion is current); mutate returns the object to write, or false
// when the live status already equals what we want; update writes it with
// UpdateStatus, which fails with 409 Conflict if someone wrote in between, in
// which case the whole cycle is retried with client-go's default backoff
// (retry.DefaultRetry: 5 tries about 10 ms apart).
//
// It returns whether it wrote. An object that no longer exists is not an
// error: there is nothing to write to. Other errors are returned wrapped,
// naming the object (key).
func UpdateShared[T any](ctx context.Context, key string,
	get func(ctx context.Context) (T, error),
	mutate func(live T) (T, bool),
	update func(ctx context.Context, obj T) error,
) (bool, error) {
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := get(ctx)
		if err != nil {
			return err
		}
		next, changed := mutate(live)
		if !changed {
			wrote = false
			return nil
		}
		if err := update(ctx, next); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return wrote, fmt.Errorf("status of %s: %w", key, err)
	}
	return wrote, nil
}
