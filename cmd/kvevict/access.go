package main

// The flags publish and mirror share that say which peers may connect:
// -allow, by source address.

import (
	"flag"
	"net/netip"
	"strings"
)

// accessFlags are the flags that admit peers.
type accessFlags struct {
	allow string
}

// register adds -allow to fs; sockets names the sockets the command binds.
func (f *accessFlags) register(fs *flag.FlagSet, sockets string) {
	fs.StringVar(&f.allow, "allow", "", "accept connections to "+sockets+" only from source addresses within `CIDR,...` (10.0.0.0/8,192.168.1.7 or fd00::/8; a bare address is that host alone): any other is closed unheard, before its greeting, and counted; none by default, which accepts every address")
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
