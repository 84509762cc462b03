package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runStdin runs the command with stdin as its standard input.
func runStdin(t *testing.T, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, stdin, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// excerptHead is the excerpt's first n lines.
func excerptHead(t *testing.T, n int) []byte {
	t.Helper()
	data, err := os.ReadFile(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	return []byte(strings.Join(lines[:n], ""))
}

// TestTraceFromStdin: -trace - reads standard input for compare and
// cluster, plain or gzip-compressed, and the output is the file's but for
// the workload's name, stdin.
func TestTraceFromStdin(t *testing.T) {
	head := excerptHead(t, 50)
	path := filepath.Join(t.TempDir(), "head.jsonl")
	if err := os.WriteFile(path, head, 0o644); err != nil {
		t.Fatal(err)
	}
	gz := gzipped(t, head)
	for _, args := range [][]string{
		{"compare", "-strategies", "lru,auto", "-capacity", "100,400"},
		{"compare", "-strategies", "lru", "-capacity", "100", "-mode", "serve"},
		{"cluster", "-engines", "2", "-capacity", "100", "-routers", "round-robin,prefix", "-format", "csv"},
	} {
		code, want, errOut := runStdin(t, nil, append(args, "-trace", path)...)
		if code != 0 {
			t.Fatalf("%v from a file: exit %d: %s", args, code, errOut)
		}
		want = strings.ReplaceAll(want, "head.jsonl", stdinName)
		for _, in := range []struct {
			name string
			data []byte
		}{{"plain", head}, {"gzip", gz}} {
			code, got, errOut := runStdin(t, bytes.NewReader(in.data), append(args, "-trace", "-")...)
			if code != 0 {
				t.Fatalf("%v from stdin, %s: exit %d: %s", args, in.name, code, errOut)
			}
			if got != want {
				t.Errorf("%v from stdin, %s: the output differs from the file's:\n%s\nwant\n%s", args, in.name, got, want)
			}
		}
	}
}

// TestTraceReadOnce: a -trace that can be read only once, a pipe (as a
// shell's process substitution gives, /dev/fd/N) or a named FIFO, plain or
// gzip-compressed, loads as the file does.
func TestTraceReadOnce(t *testing.T) {
	head := excerptHead(t, 50)
	gz := gzipped(t, head)
	want, err := loadTrace(writeTemp(t, head), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{head, gz} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { w.Write(data); w.Close() }()
		got, err := loadTrace(fmt.Sprintf("/dev/fd/%d", r.Fd()), nil)
		r.Close()
		if err != nil || len(got.Requests) != len(want.Requests) {
			t.Fatalf("from a pipe: %v, %d requests, want %d", err, len(got.Requests), len(want.Requests))
		}

		fifo := filepath.Join(t.TempDir(), "trace.fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skipf("no FIFO here: %v", err)
		}
		go func() {
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err == nil {
				f.Write(data)
				f.Close()
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		done := make(chan error, 1)
		go func() {
			got, err := loadTrace(fifo, nil)
			if err == nil && len(got.Requests) != len(want.Requests) {
				err = fmt.Errorf("%d requests, want %d", len(got.Requests), len(want.Requests))
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("from a FIFO: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("reading a FIFO hangs")
		}
		cancel()
	}
}

// gzipped is data gzip-compressed.
func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTraceErrorsSayWhat: a truncated gzip stream is reported as one, not
// as a line of invalid JSON, and a line that is not a JSON object says so
// rather than naming an empty field.
func TestTraceErrorsSayWhat(t *testing.T) {
	gz := gzipped(t, excerptHead(t, 200))
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated gzip", gz[:len(gz)/2], "truncated gzip"},
		{"an array", []byte("[1,2,3]\n"), "trace line 1: the line is a JSON array, not an object"},
		{"a string", []byte(`"x"` + "\n"), "trace line 1: the line is a JSON string, not an object"},
	} {
		code, _, errOut := runStdin(t, bytes.NewReader(tc.data), "compare", "-trace", "-")
		if code != 1 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "invalid JSON") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q, want one line saying %q", tc.name, code, errOut, tc.want)
		}
	}
}

// TestPublishTraceFromStdin: publish reads -trace - as compare does, and
// names the trace stdin.
func TestPublishTraceFromStdin(t *testing.T) {
	code, out, errOut := runStdin(t, bytes.NewReader(gzipped(t, excerptHead(t, 50))), "publish", "-bind", "tcp://127.0.0.1:0",
		"-trace", "-", "-capacity", "100", "-require-subscribers", "0", "-warmup", "0", "-linger", "0")
	if code != 0 || !strings.HasPrefix(out, "published stdin (50 requests)") {
		t.Errorf("exit %d, stdout %q, stderr %q; want published stdin (50 requests)", code, out, errOut)
	}
}
