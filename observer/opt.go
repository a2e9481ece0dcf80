package observer

// Opt is an optional event field (a key the vocabulary marks optional). The zero
// value is absent: a field nobody set is left out of the event, never rendered as
// zero.
type Opt[T any] struct {
	v  T
	ok bool
}

// Some returns a present optional holding v.
func Some[T any](v T) Opt[T] { return Opt[T]{v: v, ok: true} }

// None returns an absent optional (the same as the zero value).
func None[T any]() Opt[T] { return Opt[T]{} }

// Get returns the value and whether it is present.
func (o Opt[T]) Get() (T, bool) { return o.v, o.ok }

// Present reports whether the value is present.
func (o Opt[T]) Present() bool { return o.ok }

// Or returns the value when present, else def.
func (o Opt[T]) Or(def T) T {
	if o.ok {
		return o.v
	}
	return def
}
