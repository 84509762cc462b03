package kvevents

import (
	"log/slog"
	"sync"
)

// onceLog logs the first occurrence of each kind of trouble and no later
// one, so that a misbehaving peer cannot flood the log; the counts in the
// stats tell how often each happened since. Safe for concurrent use.
type onceLog struct {
	log  *slog.Logger
	mu   sync.Mutex
	seen map[any]bool
}

// warn logs msg with err if kind has not been logged before.
func (l *onceLog) warn(kind any, msg string, err error) {
	l.mu.Lock()
	first := !l.seen[kind]
	if first {
		if l.seen == nil {
			l.seen = make(map[any]bool)
		}
		l.seen[kind] = true
	}
	l.mu.Unlock()
	if first {
		l.log.Warn(msg, "err", err)
	}
}
