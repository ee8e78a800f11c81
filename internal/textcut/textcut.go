// Package textcut cuts strings for people to read: at a character boundary, never inside
// a UTF-8 sequence (a cut there printed U+FFFD, or broke a terminal's line).
package textcut

import "unicode/utf8"

// Prefix is the longest prefix of s of at most n bytes that ends at a character
// boundary (s whole where it is short enough; "" for n <= 0). Invalid bytes count as
// characters of one byte each, as ranging over a string reads them.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	// the character holding byte n starts at most UTFMax-1 bytes before it; cut before it
	// where it runs past n (bytes of no valid character are one each: cut at n)
	for j := n; j >= 0 && j > n-utf8.UTFMax; j-- {
		if utf8.RuneStart(s[j]) {
			if _, size := utf8.DecodeRuneInString(s[j:]); j+size > n {
				return s[:j]
			}
			break
		}
	}
	return s[:n]
}
