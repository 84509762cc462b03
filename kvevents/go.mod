module github.com/sagellm/kvevict/kvevents

go 1.24.0

require (
	github.com/sagellm/kvevict v0.0.0
	github.com/vmihailenco/msgpack/v5 v5.4.1
)

require github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect

replace github.com/sagellm/kvevict => ../
