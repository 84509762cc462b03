// Package tracetest finds the Mooncake conversation trace for the tests
// that replay it, in any package or module of the repository.
package tracetest

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Conversation returns the path of the full conversation trace, which
// lives beside the repository (../shared/traces), not in it. On a fresh
// clone it is absent and the test skips, unless CI is "true", where a
// missing trace means the CI machine lost it and the test fails.
func Conversation(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("tracetest: no caller information to find the repository")
	}
	// file is <repository>/internal/tracetest/tracetest.go.
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "traces", "mooncake_conversation.jsonl")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%s is absent, and CI=true requires it", path)
		}
		tb.Skipf("%s is absent", path)
	}
	return path
}
