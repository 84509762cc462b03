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
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./... from the module's root", name)
		}
	}
}
