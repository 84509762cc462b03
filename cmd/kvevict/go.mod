module github.com/sagellm/kvevict/cmd/kvevict

go 1.24.0

require (
	github.com/sagellm/kvevict v0.0.0
	github.com/sagellm/kvevict/kvevents v0.0.0
	github.com/vmihailenco/msgpack/v5 v5.4.1
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/crypto v0.48.0 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
	golang.org/x/text v0.34.0 // indirect
)

replace (
	github.com/sagellm/kvevict => ../../
	github.com/sagellm/kvevict/kvevents => ../../kvevents
)
