package kvevents

// The memory budget. A process that publishes, or that subscribes and
// mirrors, gives each of its parts a share of one budget in bytes, so
// that what peers can make it hold adds up to a known sum; the commands
// set the runtime's memory limit to the same budget.

import (
	"fmt"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// Memory budgets.
const (
	// DefaultMemory is the budget, in bytes, of a [Publisher] unless told
	// otherwise, and of a [Subscriber] and the [Mirror] it feeds
	// together: DefaultSubscriberMemory and DefaultMirrorMemory, with an
	// eighth left for the runtime.
	DefaultMemory = 512 << 20
	// DefaultSubscriberMemory and DefaultMirrorMemory are a
	// [Subscriber]'s and a [Mirror]'s budgets unless told otherwise:
	// DefaultMemory split as [MirrorShares] splits it.
	DefaultSubscriberMemory = DefaultMemory / 2
	DefaultMirrorMemory     = DefaultMemory / 8 * 3
	// MinMemory is the least budget any of them takes: room for a few
	// connections and a batch.
	MinMemory = 16 << 20
)

// MirrorShares splits the budget of n bytes of a process that subscribes
// and mirrors: half to its [Subscriber] ([WithSubscriberMemory]), three
// eighths to its [Mirror] ([WithMirrorMemory]), and the last eighth to
// the runtime and the rest of the process.
func MirrorShares(n int64) (subscriber, mirror int64) { return n / 2, n / 8 * 3 }

// memory checks a memory option's budget of n bytes for what ("publisher",
// "subscriber", "mirror"), as heartbeat and allow check theirs: it returns
// n, and errs with an error added if n is below MinMemory.
func memory(what string, n int64, errs []error) (int64, []error) {
	if n < MinMemory {
		errs = append(errs, fmt.Errorf("kvevents: %s memory %d bytes, want at least %d", what, n, MinMemory))
	}
	return n, errs
}

// minHandshakes is the fewest handshakes a socket has room for at once:
// with one, peers that come together take each other's place.
const minHandshakes = 4

// connectionBytes is what a connection past its handshake, or in it,
// costs beside what it reads and queues: its read and write buffers and
// the stacks of its goroutines. A handshake's slot costs twice that: the
// connections waiting on probation for one hold a goroutine each.
const connectionBytes = 160 << 10

// connections returns the limits on a listening socket's connections
// within part bytes: a sixteenth of them in their handshake, at least
// minHandshakes and at most zmtp's defaults, and the rest peers, at most
// want. Unless lim sets how many peers one address may hold, a sixteenth
// of the peers (at least 1), as DefaultMaxPeersPerAddress is of
// DefaultMaxPeers: a per-address limit above the peers a budget holds
// would let one host take every other's room.
func connections(part int64, want int, lim zmtp.Limits) zmtp.Limits {
	n := max(part/connectionBytes, 2*minHandshakes+1)
	lim.MaxHandshakes = int(min(max(n/16, minHandshakes), zmtp.DefaultMaxHandshakes))
	lim.MaxHandshakesPerSource = min(lim.MaxHandshakes, zmtp.DefaultMaxHandshakesPerSource)
	lim.MaxPeers = int(max(1, min(int64(want), n-2*int64(lim.MaxHandshakes))))
	if lim.MaxPeersPerSource <= 0 {
		lim.MaxPeersPerSource = max(1, lim.MaxPeers/16)
	}
	return lim
}

// publisherMemory is a Publisher's budget in shares, in bytes; the
// connections' and the reading's are each socket's (the PUB socket's and,
// with replay, the replay socket's, which share the budget's).
type publisherMemory struct {
	replay, queues, connections, subscriptions, reading int64
}

// publisherShares splits a Publisher's budget of n bytes, as
// WithPublisherMemory says.
func publisherShares(n int64, replay bool) publisherMemory {
	sockets := int64(1)
	if replay {
		sockets = 2
	}
	return publisherMemory{replay: n / 16 * 11, queues: n / 8, connections: n / 8 / sockets,
		subscriptions: n / 32, reading: max(n/32/sockets, 1<<20)}
}

// subscriberMemory is a Subscriber's budget in shares, in bytes.
type subscriberMemory struct {
	connections, queue, reading, held, decoding int64
}

// subscriberShares splits a Subscriber's budget of n bytes, as
// WithSubscriberMemory says.
func subscriberShares(n int64) subscriberMemory {
	return subscriberMemory{connections: n / 8 * 3, queue: n / 8, reading: n / 8, held: n / 16, decoding: n / 4}
}
