package kvevict_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeQuickStart runs the README's first Go block, the Quick start, as
// a program and compares what it prints with the "// Output:" comment that
// ends it, so that the first code a newcomer copies compiles, runs and does
// what it says.
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	if !ok {
		t.Fatal("README.md has no Go block")
	}
	src, _, ok := strings.Cut(rest, "```")
	if !ok || !strings.HasPrefix(src, "package main\n") {
		t.Fatal("README.md's first Go block is not a complete program (package main)")
	}
	_, out, ok := strings.Cut(src, "\n// Output:\n")
	if !ok {
		t.Fatal(`README.md's Quick start does not end with an "// Output:" comment`)
	}
	var want strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		want.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "//"), " ") + "\n")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run the Quick start: %v", err)
	}
	file := filepath.Join(t.TempDir(), "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// Run from this module, so that the program imports this checkout.
	cmd := exec.Command(goTool, "run", file)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run of the Quick start: %v\n%s", err, stderr.String())
	}
	if string(got) != want.String() {
		t.Fatalf("the Quick start printed\n%s\nits Output comment says\n%s", got, want.String())
	}
}
