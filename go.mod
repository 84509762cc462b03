module github.com/sagellm/kvevict

go 1.24
