package sim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Workload is a sequence of requests in arrival order, with the block size
// their hashes were cut at.
type Workload struct {
	Name        string
	BlockTokens int       // tokens per KV block; the last block of a prompt may be partial
	GroupKind   string    // what Request.Group means: "session" or "tenant"
	Requests    []Request // in arrival order
}

// MooncakeBlockTokens is the block size of the Mooncake traces' hash_ids.
const MooncakeBlockTokens = 512

// LoadTrace reads a Mooncake JSONL trace file ([TraceReader] describes the
// format) into a workload named after the file (its base name), with
// 512-token blocks and sessions as [TraceReader.Next] describes. An error
// names the path and, for a malformed line, the line.
func LoadTrace(path string) (*Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the path
	}
	defer f.Close()
	w, err := ReadWorkload(f, filepath.Base(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// ReadWorkload reads a Mooncake JSONL trace from r, once and in order, into
// a workload named name, as [LoadTrace] reads a file: for a trace that
// comes from a pipe or through a decompressor. An error names the line it
// found, not r.
func ReadWorkload(r io.Reader, name string) (*Workload, error) {
	reqs, err := ReadTrace(r)
	if err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, errors.New("no requests")
	}
	return &Workload{Name: name, BlockTokens: MooncakeBlockTokens, GroupKind: "session", Requests: reqs}, nil
}

// blockTokens returns how many tokens block i of req holds: a full block,
// except the last, which holds what remains of the prompt (clamped to
// [0, size] when a trace's lengths and hashes disagree).
func blockTokens(req *Request, i, size int) int {
	if i < len(req.HashIDs)-1 {
		return size
	}
	return min(max(req.InputTokens-size*(len(req.HashIDs)-1), 0), size)
}
