package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedIsCurrent fails while a file keygen writes differs from
// what it would write now: run go generate from the module's root.
func TestGeneratedIsCurrent(t *testing.T) {
	root, files, err := generated()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		if got, err := os.ReadFile(filepath.Join(root, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale (%v): run go generate ./... from the module's root", name, err)
		}
	}
}
