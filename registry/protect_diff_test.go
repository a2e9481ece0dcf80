package registry

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/nomicore/nomicore/yjs"
)

// scratchVerdict is the literal docs/protocol.md#protected-apply procedure, the reference for
// the protected check: clone the live state into a scratch document, apply the update, compare
// meta.
func scratchVerdict(live *yjs.Doc, update []byte) error {
	state, err := yjs.EncodeStateAsUpdate(live, nil)
	if err != nil {
		return ErrInternal.with("", err)
	}
	scratch := yjs.NewDoc(yjs.WithClientID(1), yjs.WithGUID("scratch"))
	if err := yjs.ApplyUpdate(scratch, state, nil); err != nil {
		return ErrInternal.with("", err)
	}
	before := scratch.ToJSON()[MetaRoot]
	if err := yjs.ApplyUpdate(scratch, update, nil); err != nil {
		var de *yjs.DecodeError
		if errors.As(err, &de) {
			return ErrApplyFailed.with("", err)
		}
		return ErrInternal.with("", err)
	}
	if !reflect.DeepEqual(before, scratch.ToJSON()[MetaRoot]) {
		return ErrProtected.with("", nil)
	}
	return nil
}

// protectedFixture is a hub document: meta written by the registry's client, application
// content by others.
type protectedFixture struct {
	live     *yjs.Doc
	registry uint64
}

func newProtectedFixture(t testing.TB, rng *rand.Rand) *protectedFixture {
	t.Helper()
	live := yjs.NewDoc(yjs.WithClientID(uint32(1_000_000 + rng.IntN(1000))))
	must(t, writeMeta(live, originCreate, MetaReplicationID, "0123456789abcdef0123456789abcdef", MetaEpoch, 1.0))
	must(t, writeMeta(live, originSchema, MetaSchema, map[string]any{"updatedAt": "t0", "definition": map[string]any{"a": 1.0}}))
	if rng.IntN(2) == 0 {
		must(t, writeMeta(live, originBump, MetaEpoch, 2.0)) // an overwritten value lies under meta
	}
	app := newClient(uint32(10 + rng.IntN(100)))
	app.sync(t, mustEncode(t, live, nil))
	app.set(t, "app", "k", "v")
	app.insertText(t, "text", 0, "hello world")
	app.do(t, func(d *yjs.Doc) error {
		m := yjs.NewMap()
		if err := m.Set("inner", 1.0); err != nil {
			return err
		}
		return d.GetArray("list").Push(m, "x", 2.0)
	})
	for _, u := range app.updates {
		must(t, yjs.ApplyUpdate(live, u, nil))
	}
	return &protectedFixture{live: live, registry: live.ClientID()}
}

func mustEncode(t testing.TB, d *yjs.Doc, sv []byte) []byte {
	t.Helper()
	b, err := yjs.EncodeStateAsUpdate(d, sv)
	must(t, err)
	return b
}

// randomOps makes 1–4 transactions of random edits on a client synced to the fixture, some
// under meta, and returns their updates.
func (f *protectedFixture) randomOps(t testing.TB, rng *rand.Rand, id uint32) [][]byte {
	t.Helper()
	c := newClient(id)
	c.sync(t, mustEncode(t, f.live, nil))
	metaKeys := []string{MetaEpoch, MetaReplicationID, MetaSchema, "extra", "nested"}
	values := func(key string) any {
		cur, _ := c.doc.GetMap(MetaRoot).Get(key)
		switch rng.IntN(4) {
		case 0:
			if cur != nil {
				if _, isType := cur.(*yjs.Map); !isType {
					return cur // an equal-value rewrite
				}
			}
			return 7.0
		case 1:
			return "ffffffffffffffffffffffffffffffff"
		case 2:
			return map[string]any{"updatedAt": "t1"}
		}
		return float64(rng.IntN(5))
	}
	var out [][]byte
	for range 1 + rng.IntN(4) {
		n := len(c.updates)
		var err error
		c.doc.Transact(nil, func(*yjs.Transaction) {
			for range 1 + rng.IntN(3) {
				if err != nil {
					return
				}
				meta := c.doc.GetMap(MetaRoot)
				switch rng.IntN(10) {
				case 0:
					k := metaKeys[rng.IntN(len(metaKeys))]
					err = meta.Set(k, values(k))
				case 1:
					err = meta.Delete(metaKeys[rng.IntN(len(metaKeys))])
				case 2:
					if v, ok := meta.Get("nested"); ok {
						if m, isMap := v.(*yjs.Map); isMap {
							err = m.Set("deep", float64(rng.IntN(3)))
							break
						}
					}
					err = meta.Set("nested", yjs.NewMap())
				case 3:
					err = c.doc.GetMap("app").Set(fmt.Sprint("k", rng.IntN(4)), float64(rng.IntN(9)))
				case 4:
					err = c.doc.GetMap("app").Delete("k")
				case 5:
					tx := c.doc.GetText("text")
					err = tx.Insert(rng.IntN(tx.Len()+1), "ab", nil)
				case 6:
					tx := c.doc.GetText("text")
					if tx.Len() > 2 {
						err = tx.Delete(rng.IntN(tx.Len()-2), 2)
					}
				case 7:
					if v, ok := c.doc.GetArray("list").Get(0); ok {
						if m, isMap := v.(*yjs.Map); isMap {
							err = m.Set("inner", float64(rng.IntN(9)))
						}
					}
				case 8:
					l := c.doc.GetArray("list")
					if l.Len() > 0 {
						err = l.Delete(rng.IntN(l.Len()), 1)
					}
				case 9:
					err = c.doc.GetArray("list").Push("y")
				}
			}
		})
		must(t, err)
		if len(c.updates) > n {
			out = append(out, c.updates[n])
		}
	}
	return out
}

// pick turns a client's updates into one update to check: one of them (possibly leaving a
// gap before it: pending structs), a merge, or a corrupted one.
func pick(t testing.TB, rng *rand.Rand, ups [][]byte) []byte {
	t.Helper()
	if len(ups) == 0 {
		return []byte{0, 0}
	}
	var u []byte
	switch rng.IntN(4) {
	case 0:
		m, err := yjs.MergeUpdates(ups)
		must(t, err)
		u = m
	default:
		u = ups[rng.IntN(len(ups))]
	}
	if rng.IntN(12) == 0 {
		u = append([]byte(nil), u...)
		switch rng.IntN(3) {
		case 0:
			u = u[:rng.IntN(len(u))]
		case 1:
			u[rng.IntN(len(u))] ^= byte(1 + rng.IntN(255))
		default:
			u = append(u, byte(rng.IntN(256)))
		}
	}
	return u
}

// docs/protocol.md#document-layout: the check reaches the verdict of "apply to a scratch copy,
// compare meta" for every update that changes a meta value, and classifies malformed updates
// alike. It may refuse more (equal-value rewrites, losing values, waits on the registry's
// client).
func TestS20_ProtectedCheckAgreesWithScratchCompare(t *testing.T) {
	cases := 1500
	if testing.Short() {
		cases = 200
	}
	var changed, stricter, malformed, passed int
	for i := range cases {
		seed := uint64(i)
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b9))
		f := newProtectedFixture(t, rng)
		u := pick(t, rng, f.randomOps(t, rng, uint32(5000+i)))
		got := checkProtected(f.live, u)
		want := scratchVerdict(f.live, u)
		fail := func(msg string) {
			t.Fatalf("seed %d: %s: check %v, scratch compare %v", seed, msg, got, want)
		}
		switch {
		case errors.Is(want, ErrApplyFailed):
			malformed++
			if !errors.Is(got, ErrApplyFailed) {
				fail("malformed update not classified APPLY_FAILED")
			}
		case errors.Is(want, ErrProtected):
			changed++
			if !errors.Is(got, ErrProtected) {
				fail("an update that changes meta was let through")
			}
		case want == nil:
			if errors.Is(got, ErrProtected) {
				stricter++
			} else if got != nil {
				fail("an update the scratch clone applies was refused otherwise")
			} else {
				passed++
			}
		default:
			fail("scratch clone failed")
		}
	}
	t.Logf("%d updates: %d change meta (all refused), %d refused without a visible change, %d malformed, %d let through",
		cases, changed, stricter, malformed, passed)
	if changed == 0 || passed == 0 || malformed == 0 || stricter == 0 {
		t.Fatal("the generator does not cover every verdict")
	}
}

// Whatever peers send, in whatever order, meta changes only through the registry: updates
// the check admits are applied to the live document and meta is compared after each.
func TestS20_MetaNeverChangesThroughAdmittedUpdates(t *testing.T) {
	runs := 200
	if testing.Short() {
		runs = 30
	}
	for run := range runs {
		seed := uint64(run)
		rng := rand.New(rand.NewPCG(seed, 7))
		f := newProtectedFixture(t, rng)
		want := f.live.ToJSON()[MetaRoot]
		// Several clients' updates, delivered in random order with gaps.
		var pool [][]byte
		for c := range 1 + rng.IntN(4) {
			pool = append(pool, f.randomOps(t, rng, uint32(9000+c))...)
		}
		rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
		for step, u := range pool {
			if err := checkProtected(f.live, u); err != nil {
				continue
			}
			must(t, yjs.ApplyUpdate(f.live, u, "peer"))
			if got := f.live.ToJSON()[MetaRoot]; !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d: meta changed to %v", seed, step, got)
			}
		}
		// The registry keeps writing meta; pending peer structs must not ride along.
		must(t, writeMeta(f.live, originBump, MetaEpoch, 99.0))
		want = f.live.ToJSON()[MetaRoot]
		for _, u := range pool {
			if checkProtected(f.live, u) == nil {
				must(t, yjs.ApplyUpdate(f.live, u, "peer"))
			}
		}
		if got := f.live.ToJSON()[MetaRoot]; !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: meta changed after a registry write: %v", seed, got)
		}
	}
}

// A peer that knows the registry's client id can make a struct whose origin is the
// registry's next meta write: it waits as pending and would slip into meta with that write.
func TestS20_WaitingForTheRegistryClientIsRefused(t *testing.T) {
	const registry = 777_000
	metaOps := func(d *yjs.Doc) {
		must(t, writeMeta(d, originCreate, MetaReplicationID, "0123456789abcdef0123456789abcdef", MetaEpoch, 1.0))
		must(t, writeMeta(d, originBump, MetaEpoch, 2.0))
	}
	live := yjs.NewDoc(yjs.WithClientID(registry))
	metaOps(live)
	app := newClient(12)
	app.set(t, "app", "k", "v")
	must(t, yjs.ApplyUpdate(live, app.updates[0], nil))

	// The forger replays the registry's writes under its client id (the same structs),
	// then writes what the registry will write next.
	forger := yjs.NewDoc(yjs.WithClientID(registry))
	metaOps(forger)
	must(t, yjs.ApplyUpdate(forger, app.updates[0], nil))
	if !reflect.DeepEqual(forger.StateVector(), live.StateVector()) || forger.ClientID() != registry {
		t.Fatal("the forger does not mirror the registry")
	}
	sv := live.EncodeStateVector()
	must(t, forger.GetMap(MetaRoot).Set(MetaEpoch, 3.0))
	next := mustEncode(t, forger, sv)
	attacker := newClient(4242)
	attacker.sync(t, mustEncode(t, live, nil))
	attacker.sync(t, next)
	smuggle := attacker.set(t, MetaRoot, MetaEpoch, 1000.0) // origin: the registry's next write

	eff, err := yjs.InspectUpdate(live, smuggle, MetaRoot)
	must(t, err)
	if eff.Inserts || eff.Deletes || len(eff.Waiting) != 1 || eff.Waiting[0] != registry {
		t.Fatalf("effect %+v: the case is not the one meant", eff)
	}
	wantErr(t, checkProtected(live, smuggle), ErrProtected)
	if scratchVerdict(live, smuggle) != nil {
		t.Fatal("the scratch compare sees it (the case is not the one meant)")
	}
	// Why it matters: admitted, it waits; after the registry's next write, the next remote
	// apply — however harmless — releases it into meta.
	must(t, yjs.ApplyUpdate(live, smuggle, "peer"))
	must(t, writeMeta(live, originBump, MetaEpoch, 3.0))
	harmless := app.set(t, "app", "k2", "v")
	must(t, checkProtected(live, harmless))
	must(t, yjs.ApplyUpdate(live, harmless, "peer"))
	if v, _ := live.GetMap(MetaRoot).Get(MetaEpoch); v != 1000.0 {
		t.Fatalf("epoch %v: the smuggled struct did not ride along, the refusal is untested", v)
	}
}

// FuzzProtectedCheck: on any bytes the check neither panics nor lets through an update that
// changes meta, and it classifies malformed input as the scratch clone does.
func FuzzProtectedCheck(f *testing.F) {
	for i := range 40 {
		rng := rand.New(rand.NewPCG(uint64(i), 3))
		fx := newProtectedFixture(f, rng)
		for _, u := range fx.randomOps(f, rng, uint32(7000+i)) {
			f.Add(u)
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0})
	fx := newProtectedFixture(f, rand.New(rand.NewPCG(0, 3)))
	f.Fuzz(func(t *testing.T, u []byte) {
		got := checkProtected(fx.live, u)
		want := scratchVerdict(fx.live, u)
		switch {
		case errors.Is(want, ErrApplyFailed) != errors.Is(got, ErrApplyFailed):
			t.Fatalf("malformed input classified differently: check %v, scratch %v", got, want)
		case errors.Is(want, ErrProtected) && !errors.Is(got, ErrProtected):
			t.Fatalf("a meta change let through: %v", got)
		case got != nil && !errors.Is(got, ErrProtected) && !errors.Is(got, ErrApplyFailed):
			t.Fatalf("unexpected verdict %v", got)
		}
	})
}
