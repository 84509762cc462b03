module github.com/sagellm/kvevict

go 1.24.0

require (
	github.com/hashicorp/golang-lru/arc/v2 v2.0.7
	github.com/hashicorp/golang-lru/v2 v2.0.7
)
