module github.com/sagellm/kvevict/kvevents

go 1.24.0

require (
	github.com/sagellm/kvevict v0.0.0
	github.com/vmihailenco/msgpack/v5 v5.4.1
	golang.org/x/crypto v0.48.0
)

require (
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)

replace github.com/sagellm/kvevict => ../
