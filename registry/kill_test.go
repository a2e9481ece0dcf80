package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
	"github.com/nomicore/nomicore/yjs"
)

// The document-level crash test runs this test binary again as a child (TestMain switches on
// killChildEnv) that writes Yjs updates through the registry into a bbolt store, kills it
// with SIGKILL at random moments, and checks every namespace it left: its document must
// equal the application of a prefix of the writes, at least as long as the child reported
// flushed.
const (
	killChildEnv   = "NOMICORE_REGISTRY_KILL_CHILD" // the data dir
	killRoundsEnv  = "NOMICORE_REGISTRY_KILL_ROUNDS"
	killNamespaces = 3
	killWrites     = 6000 // per namespace
)

// killPlan is what the parent tells the child (dir/plan.json).
type killPlan struct {
	Namespaces []string `json:"namespaces"`
}

func killWriterID(i int) uint32 { return uint32(50_000 + i) }

var (
	killWritesOnce sync.Once
	killWritesAll  [killNamespaces][][]byte
)

// killWritesOf returns the writes of namespace i: updates of one writer client, each adding
// exactly one unit (a character of text or a map value), so the writer's clock in a state
// vector counts the writes a document holds. They are fixed by i alone.
func killWritesOf(i int) [][]byte {
	killWritesOnce.Do(func() {
		for n := range killNamespaces {
			d := yjs.NewDoc(yjs.WithClientID(killWriterID(n)))
			var ups [][]byte
			d.OnUpdate(func(u []byte, _ any) { ups = append(ups, u) })
			text := d.GetText("text")
			m := d.GetMap("m")
			for j := range killWrites {
				var err error
				if j%3 == 2 {
					err = m.Set(fmt.Sprint("k", j%7), float64(j))
				} else {
					err = text.Insert((j*7919)%(text.Len()+1), string(rune('a'+j%26)), nil)
				}
				if err != nil {
					panic(err)
				}
			}
			killWritesAll[n] = ups
		}
	})
	return killWritesAll[i]
}

func killStoreOptions(onFlushed func(owner, ns string, through uint64)) persistence.Options {
	return persistence.Options{
		Compactor:         Compactor(),
		CompactAfterCount: 64,
		CommitDelay:       time.Millisecond,
		LockTimeout:       10 * time.Second,
		OnFlushed:         onFlushed,
	}
}

// killChild writes through the registry until it is killed (or 30 s pass), printing
// "flushed <i> <writes>" whenever namespace i is durable through that many writes.
func killChild(dir string) int {
	fail := func(what string, err error) int {
		fmt.Fprintln(os.Stderr, what+":", err)
		return 1
	}
	raw, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		return fail("plan", err)
	}
	var plan killPlan
	if err := json.Unmarshal(raw, &plan); err != nil {
		return fail("plan", err)
	}
	// Appends of this process map to write counts: writes = base + (seq - seq0).
	type origin struct {
		known        bool
		seq0, writes uint64
	}
	var mu sync.Mutex
	origins := make([]origin, killNamespaces)
	index := map[string]int{}
	for i, ns := range plan.Namespaces {
		index[ns] = i
	}
	st, err := persistence.OpenDataDir(dir, killStoreOptions(func(_, ns string, through uint64) {
		i := index[ns]
		mu.Lock()
		o := origins[i]
		mu.Unlock()
		if o.known && through >= o.seq0 {
			persistencetest.Say("flushed %d %d", i, o.writes+(through-o.seq0))
		}
	}))
	if err != nil {
		return fail("open store", err)
	}
	reg, err := New(Config{Role: RoleHub, Catalog: st, Documents: st})
	if err != nil {
		return fail("registry", err)
	}
	killWritesOf(0) // make the writes before starting the clock
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, killNamespaces)
	for i, ns := range plan.Namespaces {
		l, err := reg.Open(ctx, owner, ns)
		if err != nil {
			return fail("open "+ns, err)
		}
		sv, err := l.StateVector(ctx)
		if err != nil {
			return fail("state vector", err)
		}
		dsv, err := yjs.DecodeStateVector(sv)
		if err != nil {
			return fail("state vector", err)
		}
		have := dsv[uint64(killWriterID(i))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := have; j < killWrites && ctx.Err() == nil; j++ {
				res, err := l.WriteLocal(ctx, killWritesOf(i)[j])
				if err != nil {
					errs <- err
					return
				}
				if j == have {
					mu.Lock()
					origins[i] = origin{true, res.Seq, j + 1}
					mu.Unlock()
				}
			}
		}()
	}
	persistencetest.Say("ready")
	wg.Wait()
	close(errs)
	for err := range errs {
		return fail("write", err)
	}
	<-ctx.Done()
	return 0
}

func TestKill9_DocumentsArePrefixesOfTheWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes; skipped under -short")
	}
	rounds := 10
	if s := os.Getenv(killRoundsEnv); s != "" {
		n, err := strconv.Atoi(s)
		must(t, err)
		rounds = n
	}
	dir := t.TempDir()
	bases := setUpKillStore(t, dir)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	best := make([]uint64, killNamespaces) // the longest prefix found so far
	for round := range rounds {
		reported := runKillChild(t, dir, rng)
		found := checkKillStore(t, dir, bases, reported)
		for i := range found {
			if found[i] < best[i] {
				t.Fatalf("round %d: namespace %d went back from %d to %d writes", round, i, best[i], found[i])
			}
			best[i] = found[i]
		}
		t.Logf("round %d: reported flushed %v, found %v", round, reported, found)
	}
	if best[0]+best[1]+best[2] == 0 {
		t.Fatal("no child wrote anything")
	}
}

// setUpKillStore creates the namespaces and returns their initial states.
func setUpKillStore(t *testing.T, dir string) [][]byte {
	st, err := persistence.OpenDataDir(dir, killStoreOptions(nil))
	must(t, err)
	reg, err := New(Config{Role: RoleHub, Catalog: st, Documents: st})
	must(t, err)
	var plan killPlan
	var bases [][]byte
	for range killNamespaces {
		c, err := reg.Create(ctxT(t), owner)
		must(t, err)
		l, err := reg.Open(ctxT(t), owner, c.NamespaceID)
		must(t, err)
		bases = append(bases, mustState(t, l, nil))
		l.Release()
		plan.Namespaces = append(plan.Namespaces, c.NamespaceID)
	}
	must(t, reg.Close(ctxT(t)))
	must(t, st.Close(ctxT(t)))
	raw, err := json.Marshal(plan)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "plan.json"), raw, 0o600))
	return bases
}

// runKillChild starts a child, kills it with SIGKILL at a random moment after it is ready,
// and returns the write counts it reported durable.
func runKillChild(t *testing.T, dir string, rng *rand.Rand) []uint64 {
	child := persistencetest.StartChild(t, killChildEnv+"="+dir)
	reported := make([]uint64, killNamespaces)
	timeout := time.After(20 * time.Second)
	var fire <-chan time.Time
wait:
	for {
		select {
		case line, ok := <-child.Lines:
			if !ok {
				break wait
			}
			persistencetest.NoteFlushed(reported, line)
			if line == "ready" {
				fire = time.After(time.Duration(rng.IntN(120)) * time.Millisecond)
			}
		case <-fire:
			child.Kill()
		case <-timeout:
			t.Fatal("child not ready")
		}
	}
	child.WaitKilled(t)
	return reported
}

// checkKillStore reopens the store and checks each namespace against the writes; it returns
// how many writes each holds.
func checkKillStore(t *testing.T, dir string, bases [][]byte, reported []uint64) []uint64 {
	raw, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	must(t, err)
	var plan killPlan
	must(t, json.Unmarshal(raw, &plan))
	st, err := persistence.OpenDataDir(dir, killStoreOptions(nil))
	must(t, err)
	defer func() { must(t, st.Close(ctxT(t))) }()
	reg, err := New(Config{Role: RoleHub, Catalog: st, Documents: st})
	must(t, err)
	defer func() { must(t, reg.Close(ctxT(t))) }()
	found := make([]uint64, killNamespaces)
	for i, ns := range plan.Namespaces {
		l, err := reg.Open(ctxT(t), owner, ns)
		must(t, err)
		got := leaseDoc(t, l)
		l.Release()
		k := got.StateVector()[uint64(killWriterID(i))]
		if k < reported[i] {
			t.Fatalf("namespace %d holds %d writes, but %d were reported flushed", i, k, reported[i])
		}
		if k > killWrites {
			t.Fatalf("namespace %d: writer clock %d", i, k)
		}
		if got.HasPending() {
			t.Fatalf("namespace %d holds pending structs: a write is missing in the middle", i)
		}
		want := docOf(t, append([][]byte{bases[i]}, killWritesOf(i)[:k]...)...)
		sameDoc(t, got, want)
		found[i] = k
	}
	return found
}
