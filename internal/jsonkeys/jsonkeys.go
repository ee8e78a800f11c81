// Package jsonkeys finds what encoding/json passes over without a word: a key given twice
// in one object (json.Unmarshal keeps the last value).
package jsonkeys

import (
	"bytes"
	"encoding/json"
)

// maxDepth bounds the nesting walked (a file of a million "[" is a stack, not a machine).
const maxDepth = 64

// Duplicate is the first key that one object of the JSON value data gives twice, as its
// path from the top ("intra.bandwidth_gbs", a top-level key alone), or "" where none is
// (or data is not JSON, which the caller's own decode reports).
func Duplicate(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dup, _ := walk(dec, "", 0)
	return dup
}

// walk reads one value from dec; it returns the first duplicate key's path, and false
// where the value could not be read.
func walk(dec *json.Decoder, path string, depth int) (string, bool) {
	t, err := dec.Token()
	if err != nil || depth > maxDepth {
		return "", false
	}
	switch t {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return "", false
			}
			key, _ := k.(string)
			p := key
			if path != "" {
				p = path + "." + key
			}
			if seen[key] {
				return p, true
			}
			seen[key] = true
			if dup, ok := walk(dec, p, depth+1); dup != "" || !ok {
				return dup, ok
			}
		}
		_, err = dec.Token() // '}'
		return "", err == nil
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if dup, ok := walk(dec, path+"[]", depth+1); dup != "" || !ok {
				return dup, ok
			}
		}
		_, err = dec.Token() // ']'
		return "", err == nil
	}
	return "", true
}
