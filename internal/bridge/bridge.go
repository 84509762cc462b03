// Package bridge carries the one function package kvevict lends package
// prefix: resolving a strategy's name and kvevict's options, which are
// opaque outside kvevict, into the mechanism and parameters a prefix tree
// ranks by, by the rules kvevict.New and kvevict.NewIndex follow.
//
// It is a variable that kvevict sets when it is initialized, as
// google.golang.org/grpc's internal package carries what grpc's
// sub-packages need of it. Nothing else works without a second table of
// the strategies: prefix cannot call kvevict's unexported code, and this
// package, below kvevict, cannot import it. A method on kvevict's option
// values, reached by a type assertion, would serve a tree given options,
// but a tree given none must still learn which mechanism its strategy
// names. prefix imports kvevict, so Go initializes kvevict first and
// prefix never finds the variable unset. It is one typed function with
// one caller, not a registry: the rules stay in kvevict's options.go.
package bridge

import "github.com/sagellm/kvevict/internal/rank"

// ResolveTree looks up strategy as kvevict.New does and applies opts, the
// tree's []kvevict.Option, for prefix.New: it returns the strategy's
// mechanism and the parameters the options resolve to, or kvevict's error
// for an unknown strategy, an invalid value, or an option that does not
// apply to a tree. Package kvevict sets it (options.go).
var ResolveTree func(strategy string, opts any) (rank.Kind, rank.Config, error)
