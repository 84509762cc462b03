package rank

// QoSKey evicts lower priority first and, within a priority, the least
// recently used. A high-priority tenant loses blocks only when no
// lower-priority sequence can be evicted.
func QoSKey(priority int8, lastAccess int64) Key {
	return Key{Major: int64(priority), Minor: lastAccess}
}
