package zmtp

import "slices"

// Subscriptions returns the distinct topic prefixes the connected
// subscribers hold, sorted. O(subscriptions).
func (p *Pub) Subscriptions() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []string
	for pp := range p.peers {
		pp.mu.Lock()
		for s := range pp.subs {
			out = append(out, s)
		}
		pp.mu.Unlock()
	}
	slices.Sort(out)
	return slices.Compact(out)
}
