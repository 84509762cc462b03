package zmtp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
)

// Transports returns the endpoint schemes this package supports.
func Transports() []string { return []string{"inproc", "ipc", "tcp"} }

// endpoint is a parsed "scheme://address".
type endpoint struct {
	scheme string // "tcp", "ipc" or "inproc"
	addr   string // host:port (host empty for all interfaces), a path, or a name
	raw    string
}

func (e endpoint) String() string { return e.raw }

func parseEndpoint(s string) (endpoint, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	e := endpoint{scheme: scheme, addr: rest, raw: s}
	switch {
	case !ok || (scheme != "tcp" && scheme != "ipc" && scheme != "inproc"):
		return e, fmt.Errorf("zmtp: endpoint %q: want scheme://address with scheme one of %s", s, strings.Join(Transports(), ", "))
	case rest == "":
		return e, fmt.Errorf("zmtp: endpoint %q: no address", s)
	case scheme == "tcp":
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return e, fmt.Errorf("zmtp: endpoint %q: %w", s, err)
		}
		if host == "*" {
			host = ""
		}
		if port == "*" {
			port = "0"
		}
		e.addr = net.JoinHostPort(host, port)
	}
	return e, nil
}

func (e endpoint) listen() (net.Listener, error) {
	switch e.scheme {
	case "tcp":
		return net.Listen("tcp", e.addr)
	case "ipc":
		// A socket file left by a process that died would make the bind
		// fail, as libzmq would not; anything else at the path is kept.
		if fi, err := os.Lstat(e.addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(e.addr)
		}
		return net.Listen("unix", e.addr)
	}
	return listenInproc(e.addr)
}

// dialable returns an error for an endpoint one can listen on only.
func (e endpoint) dialable() error {
	if host, _, _ := net.SplitHostPort(e.addr); e.scheme == "tcp" && host == "" {
		return fmt.Errorf("zmtp: endpoint %q: no host to connect to", e.raw)
	}
	return nil
}

func (e endpoint) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	switch e.scheme {
	case "tcp":
		return d.DialContext(ctx, "tcp", e.addr)
	case "ipc":
		return d.DialContext(ctx, "unix", e.addr)
	}
	return dialInproc(ctx, e.addr)
}

// label names a peer for Stats: its remote address when it has one.
func label(nc net.Conn, e endpoint) string {
	if a := nc.RemoteAddr(); a != nil {
		if s := a.String(); s != "" && s != "@" && s != "<nil>" && s != "pipe" {
			return s
		}
	}
	return e.raw
}

// The inproc transport: listeners registered by name in this process,
// connections made of net.Pipe.
var inproc = struct {
	sync.Mutex
	m map[string]*inprocListener
}{m: make(map[string]*inprocListener)}

// ErrNotBound is what a dial to an inproc name nobody listens on wraps,
// the in-process form of a refused connection.
var ErrNotBound = errors.New("connection refused: nothing bound")

type inprocListener struct {
	name string
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

type inprocAddr string

func (a inprocAddr) Network() string { return "inproc" }
func (a inprocAddr) String() string  { return "inproc://" + string(a) }

func listenInproc(name string) (net.Listener, error) {
	inproc.Lock()
	defer inproc.Unlock()
	if inproc.m[name] != nil {
		return nil, fmt.Errorf("zmtp: inproc://%s: address already in use", name)
	}
	l := &inprocListener{name: name, ch: make(chan net.Conn), done: make(chan struct{})}
	inproc.m[name] = l
	return l, nil
}

func dialInproc(ctx context.Context, name string) (net.Conn, error) {
	inproc.Lock()
	l := inproc.m[name]
	inproc.Unlock()
	if l == nil {
		return nil, fmt.Errorf("zmtp: inproc://%s: %w", name, ErrNotBound)
	}
	a, b := net.Pipe()
	select {
	case l.ch <- b:
		return a, nil
	case <-l.done:
		err := fmt.Errorf("zmtp: inproc://%s: %w", name, ErrNotBound)
		a.Close()
		b.Close()
		return nil, err
	case <-ctx.Done():
		a.Close()
		b.Close()
		return nil, ctx.Err()
	}
}

func (l *inprocListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *inprocListener) Close() error {
	l.once.Do(func() {
		inproc.Lock()
		delete(inproc.m, l.name)
		inproc.Unlock()
		close(l.done)
	})
	return nil
}

func (l *inprocListener) Addr() net.Addr { return inprocAddr(l.name) }
