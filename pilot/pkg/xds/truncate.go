// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"strconv"
	"unicode/utf8"
)

// MaxNackMessage is the most bytes of a NACK's error_detail message that
// the server keeps: in its log line and in /debug/syncz. A proxy chooses
// that message; without a bound, one NACK of a megabyte becomes megabytes
// of log per push.
const MaxNackMessage = 1024

// truncateMessage returns msg when it fits in MaxNackMessage bytes, else
// its first MaxNackMessage bytes (cut back to a whole UTF-8 rune) followed
// by "... (N bytes more)", N counting the bytes left out.
func truncateMessage(msg string) string {
	if len(msg) <= MaxNackMessage {
		return msg
	}
	cut := MaxNackMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "... (" + strconv.Itoa(len(msg)-cut) + " bytes more)"
}
