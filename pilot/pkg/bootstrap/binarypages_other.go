// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package bootstrap

import "time"

// releaseBinaryPages is Linux-only; elsewhere it releases nothing.
func releaseBinaryPages() (int64, error) { return 0, nil }

// processCPU is not read outside Linux.
func processCPU() (time.Duration, bool) { return 0, false }
