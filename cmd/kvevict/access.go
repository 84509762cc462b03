package main

// The flags publish and mirror share that say which peers may connect:
// -allow, by source address, and the CURVE keys, by key.

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/sagellm/kvevict/kvevents"
)

// accessFlags are the flags that admit peers.
type accessFlags struct {
	allow                                  string
	curveSecret, curveServer, curveClients string
}

// register adds -allow and the -curve flags to fs; sockets names the
// sockets the command binds.
func (f *accessFlags) register(fs *flag.FlagSet, sockets string) {
	fs.StringVar(&f.allow, "allow", "", "accept connections to "+sockets+" only from source addresses within `CIDR,...` (10.0.0.0/8,192.168.1.7 or fd00::/8; a bare address is that host alone): any other is closed unheard, before its greeting, and counted; none by default, which accepts every address")
	fs.StringVar(&f.curveSecret, "curve-secret", "", "speak CURVE (ZeroMQ's encryption and authentication) on every socket, with the secret key in `FILE` (one Z85 key on a line, as zmq.curve_keypair writes it): a socket that binds is the CURVE server of its public key, one that connects a client that authenticates with it; peers without CURVE (vLLM's publisher) cannot connect")
	fs.StringVar(&f.curveServer, "curve-server-key", "", "with -curve-secret: the public key, in `FILE`, of the side this one connects to (its -curve-secret's); required where a socket connects")
	fs.StringVar(&f.curveClients, "curve-clients", "", "with -curve-secret: admit to the sockets this side binds only the clients whose public keys are in `FILE`, one a line; any client that knows our public key otherwise")
}

// curve returns the CURVE configuration the flags give, or nil without
// -curve-secret, for a command whose sockets bind (binds) and connect
// (connects).
func (f *accessFlags) curve(binds, connects bool) (*kvevents.Curve, error) {
	if f.curveSecret == "" {
		if f.curveServer != "" || f.curveClients != "" {
			return nil, usagef("-curve-server-key and -curve-clients need -curve-secret, this side's own key")
		}
		return nil, nil
	}
	secret, err := keyFile("-curve-secret", f.curveSecret, true)
	if err != nil {
		return nil, err
	}
	c := &kvevents.Curve{Secret: secret[0]}
	switch {
	case connects && f.curveServer == "":
		return nil, usagef("-curve-secret: a socket connects, and needs -curve-server-key FILE, the public key of the side it connects to")
	case !connects && f.curveServer != "":
		return nil, usagef("-curve-server-key: no socket connects here (a socket that binds is the CURVE server); give it to the side that connects")
	case !binds && f.curveClients != "":
		return nil, usagef("-curve-clients: no socket binds here to admit clients; give it to the side that binds")
	}
	if f.curveServer != "" {
		server, err := keyFile("-curve-server-key", f.curveServer, true)
		if err != nil {
			return nil, err
		}
		c.Server = server[0]
	}
	if f.curveClients != "" {
		if c.Clients, err = keyFile("-curve-clients", f.curveClients, false); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// keyFile reads the keys of the file a flag names, exactly one if one.
func keyFile(flagName, path string, one bool) ([]kvevents.CurveKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("%s: %v", flagName, err)
	}
	keys, err := kvevents.ReadCurveKeys(strings.NewReader(string(b)))
	if err == nil && one && len(keys) != 1 {
		err = fmt.Errorf("%d keys, want one", len(keys))
	}
	if err != nil {
		return nil, usagef("%s %s: %v", flagName, path, err)
	}
	return keys, nil
}

// prefixes returns -allow's prefixes, refusing a malformed one by name.
func (f *accessFlags) prefixes() ([]netip.Prefix, error) {
	if strings.TrimSpace(f.allow) == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for _, s := range strings.Split(f.allow, ",") {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || a.Zone() != "" {
				return nil, usagef("-allow %q: %q is neither a CIDR prefix (10.0.0.0/8, fd00::/8) nor an IP address", f.allow, s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
