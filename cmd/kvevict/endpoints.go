package main

// The endpoint flags publish and mirror share: -bind, -connect and the
// older -endpoint, whose direction a rule reads from the address.

import (
	"flag"
	"slices"
	"strings"

	"github.com/sagellm/kvevict/kvevents"
)

// socketFlags are the flags that place a PUB or SUB socket.
type socketFlags struct {
	bind, connect, endpoint string
}

// register adds -bind, -connect and -endpoint to fs; peer names the
// socket on the other side of the link, peerCommand the command that runs
// it, and rule the older flag's rule.
func (f *socketFlags) register(fs *flag.FlagSet, socket, peer, peerCommand, rule string) {
	fs.StringVar(&f.bind, "bind", "", "bind the "+socket+" socket on `ADDR`, for "+peer+"s to connect to ("+peerCommand+" -connect): one interface (tcp://127.0.0.1:5557, tcp://[::1]:5557, a pod's address), every one (tcp://*:5557), ipc:///path or inproc://name")
	fs.StringVar(&f.connect, "connect", "", "connect the "+socket+" socket to a "+peer+" that binds `ADDR` ("+peerCommand+" -bind); reconnects whenever it goes away")
	fs.StringVar(&f.endpoint, "endpoint", "", "the older form: `ADDR` is bound if "+rule+", else connected to")
}

// resolve returns the address given and whether the socket binds it:
// exactly one of the three flags must be given.
func (f *socketFlags) resolve(byRule func(string) bool) (addr string, dir kvevents.Direction, err error) {
	var given []string
	for _, g := range []struct {
		name, addr string
		dir        kvevents.Direction
	}{{"-bind", f.bind, kvevents.Bind}, {"-connect", f.connect, kvevents.Connect}, {"-endpoint", f.endpoint, kvevents.Connect}} {
		if g.addr == "" {
			continue
		}
		given = append(given, g.name)
		addr, dir = g.addr, g.dir
		if err := checkAddress(g.name, g.addr); err != nil {
			return "", 0, err
		}
		if g.name == "-endpoint" && byRule(g.addr) {
			dir = kvevents.Bind
		}
	}
	switch {
	case len(given) == 0:
		return "", 0, usagef("-bind ADDR or -connect ADDR is required, such as -bind tcp://*:5557 or -connect tcp://host:5557 (one side binds, the other connects)")
	case len(given) > 1:
		return "", 0, usagef("%s: give one of -bind, -connect and -endpoint", strings.Join(given, " and "))
	case dir == kvevents.Connect && kvevents.Wildcard(addr):
		return "", 0, usagef("-connect %s: a wildcard address can only be bound; give the address of the side that binds", addr)
	}
	return addr, dir, nil
}

// replayAddress returns the replay flag given, the new or the older one,
// refusing both, and a wildcard where the socket connects.
func replayAddress(name, addr, older string, connects bool) (string, error) {
	switch {
	case addr != "" && older != "":
		return "", usagef("%s and -replay-endpoint: give one", name)
	case addr == "":
		addr, name = older, "-replay-endpoint"
	}
	if addr == "" {
		return "", nil
	}
	if err := checkAddress(name, addr); err != nil {
		return "", err
	}
	if connects && kvevents.Wildcard(addr) {
		return "", usagef("%s %s: a wildcard address can only be bound; give the address of the publisher's replay socket", name, addr)
	}
	return addr, nil
}

// checkAddress refuses an address ZeroMQ cannot use, before any socket
// opens.
func checkAddress(flagName, addr string) error {
	scheme, rest, ok := strings.Cut(addr, "://")
	if !ok || rest == "" || !slices.Contains(kvevents.Transports(), scheme) {
		return usagef("%s %q must be transport://address with transport one of %s", flagName, addr, strings.Join(kvevents.Transports(), ", "))
	}
	return nil
}
