// Package clip cuts text to a byte budget (Slurm's node Reason,
// node-problem-detector's message length, label values) without
// splitting a UTF-8 character. It is the one implementation of that rule
// (TestOneOwner).
package clip

import "unicode/utf8"

// Bytes cuts s to at most n bytes, never inside a valid UTF-8 sequence:
// where byte n continues a character, the cut moves back to that
// character's start. Invalid bytes count as characters of their own and
// are kept as they are ("\xff" and 100 letters cut to 80 is "\xff" and 79
// letters, not ""); a reader that needs valid UTF-8 escapes them itself.
func Bytes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	// The start of the character byte n is in: a valid character is at
	// most utf8.UTFMax bytes, so look back no further.
	start := n
	for back := 0; start > 0 && back < utf8.UTFMax-1 && !utf8.RuneStart(s[start]); back++ {
		start--
	}
	if r, size := utf8.DecodeRuneInString(s[start:]); (r != utf8.RuneError || size > 1) && start+size > n {
		return s[:start] // a valid character straddles the cut
	}
	// Byte n starts a character, or is a stray byte of no valid one.
	return s[:n]
}
