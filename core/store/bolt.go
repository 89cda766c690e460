package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"
	"github.com/prorl/prorl/core/trajectory"
	bolt "go.etcd.io/bbolt"
)

var (
	bPending = []byte("pending") // id -> Pending
	bResults = []byte("results") // seq (big endian) -> Result
	bIndex   = []byte("index")   // id -> seq
	bIdem    = []byte("idem")    // idempotency key -> Submission
	bMeta    = []byte("meta")    // "seq" -> last seq; "state:<name>" -> a host value (SetState)
	bTasks   = []byte("tasks")   // task ref -> the task's bytes, once for every pending record naming it
	bTaskRC  = []byte("taskrc")  // task ref -> how many pending records name it (uint64, big endian)
	keySeq   = []byte("seq")
)

// decode reads a value of the file. goccy's decoder (twice as fast as
// encoding/json on the whole trajectories read at open) reads its input
// until a NUL it appends, and some malformed input (`{"\`: an escape
// that consumes the NUL) took it past the end: it panicked now and then,
// and under -race checkptr caught the read (TestBoltDamagedValue). Padding
// the value with whitespace keeps every such step inside the copy goccy
// scans (an escape or a literal consumes at most a few bytes before the
// scan meets the NUL) and changes no valid value. Validating each value
// with encoding/json instead cost a third of the open (BenchmarkBoltOpen).
// The recover stays as a second guard.
func decode(v []byte, out any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("not JSON (a damaged store file?): %v", p)
		}
	}()
	padded := make([]byte, len(v)+decodePad)
	copy(padded, v)
	for i := len(v); i < len(padded); i++ {
		padded[i] = ' '
	}
	if err := json.Unmarshal(padded, out); err != nil {
		return fmt.Errorf("not JSON (a damaged store file?): %w", err)
	}
	return nil
}

// decodePad is more than goccy's longest step past a token's start (a
// surrogate pair's two escapes, 12 bytes).
const decodePad = 16

// Bolt is a durable Store in one bbolt file: a submission is on disk before
// it is acknowledged, a result before it is published, and both survive a
// crash until acknowledged. Concurrent writes share a commit (and fsync).
// Reads are served from an in-memory index of the unacknowledged results,
// rebuilt from the file at open: the file is the truth, memory the view.
type Bolt struct {
	db  *bolt.DB
	mem *Memory
	mu  sync.Mutex
	seq uint64 // last sequence number handed out

	// Commits finish out of order; results are published strictly in
	// sequence order, or a reader paging with since= would step past one
	// that committed late and never see it. A Finish whose result waits for
	// an earlier one is woken once, by the publish that passes it (a
	// broadcast woke every waiter at every publish: 3.3 wakeups a result).
	pubMu     sync.Mutex
	published uint64
	waiting   map[uint64]chan struct{}      // closed when published reaches the key
	held      map[uint64]*trajectory.Result // nil: that number's commit failed

	// A write the file refused (read-only, full disk, I/O error) puts the
	// store in fault: results finished since are published from memory and
	// kept in unwritten until a retry with backoff writes them; Healthy
	// reports the fault, so the host stops taking submissions and is not
	// ready until then.
	faultMu   sync.Mutex
	fault     error
	unwritten []*trajectory.Result
	healing   bool
	// Cancellations and host values refused meanwhile are held too, and
	// written after the results (a cancellation of a rollout whose result
	// is written first finds no pending record, as it would have).
	heldCancels []heldCancel
	heldState   map[string][]byte

	// Results are committed by one goroutine in batches (commitLoop);
	// closeMu and closed keep Finish from sending once Close began.
	commits  chan *commitReq
	loopDone chan struct{}
	closeMu  sync.RWMutex
	closed   bool
	stop     chan struct{} // closed by Close: the healer gives up
	healers  sync.WaitGroup
	batches  atomic.Int64 // commits of results made
}

// resultBatchDelay is how long a finished result waits for others to share
// its commit (bbolt's Batch waits 10 ms): each commit costs two fsyncs and
// the tree's upper pages whatever it holds. Bench Rollouts, single-turn
// rollouts with the durable store, four pairs interleaved with the 10 ms of
// db.Batch: the host's CPU over the simulator's 0.78 / 0.88 / 0.85 / 0.88
// against 0.87 / 0.87 / 0.89 / 0.89; 60 ms measured no better than 25
// (0.83 / 0.87 / 1.01 against 0.84 / 0.84 / 0.89). A result is published
// up to this much later; submissions and acknowledgements keep db.Batch's
// 10 ms (a trainer waits on them).
const resultBatchDelay = 25 * time.Millisecond

// resultBatchMax bounds a commit's results (bbolt's MaxBatchSize).
const resultBatchMax = 1000

type commitReq struct {
	r    *trajectory.Result
	done chan error
	// Set by commitLoop before done is sent.
	published bool
	dropped   []*trajectory.Result
}

// maxUnwritten bounds the results held in memory during a fault: new
// submissions are refused then, so only rollouts already running finish.
const maxUnwritten = 1 << 20

// OpenBolt opens (or creates) the store file.
func OpenBolt(path string, retention int) (*Bolt, error) {
	// etcd's settings: the freelist is rebuilt on open instead of written
	// with every commit, and kept as a map (no sorting of free page ids).
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w (is another host using it?)", path, err)
	}
	b := &Bolt{db: db, mem: NewMemory(retention), held: map[uint64]*trajectory.Result{}, waiting: map[uint64]chan struct{}{}}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bPending, bResults, bIndex, bIdem, bMeta, bTasks, bTaskRC} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if v := tx.Bucket(bMeta).Get(keySeq); len(v) == 8 {
			b.seq = binary.BigEndian.Uint64(v)
		} else {
			b.seq = FreshSeq() // a new file: written with its first result
		}
		return tx.Bucket(bResults).ForEach(func(k, v []byte) error {
			r := &trajectory.Result{}
			if err := decode(v, r); err != nil {
				return fmt.Errorf("result %x: %w", k, err)
			}
			r.Encoded = append([]byte(nil), v...) // v is only valid inside the transaction
			b.mem.add(r)
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	b.mem.seq = b.seq
	b.published = b.seq
	b.commits, b.loopDone, b.stop = make(chan *commitReq, resultBatchMax), make(chan struct{}), make(chan struct{})
	go b.commitLoop()
	return b, nil
}

// commitLoop commits the results sent to it, those arriving within
// resultBatchDelay of a batch's first together, until Close. It publishes
// what it committed before it answers, so a Finish woken by its answer
// finds its result visible unless an earlier one is still on its way: one
// wakeup a result, not two.
func (b *Bolt) commitLoop() {
	defer close(b.loopDone)
	for first := range b.commits {
		batch := []*commitReq{first}
		t := time.NewTimer(resultBatchDelay)
	fill:
		for len(batch) < resultBatchMax {
			select {
			case c, ok := <-b.commits:
				if !ok {
					break fill
				}
				batch = append(batch, c)
			case <-t.C:
				break fill
			}
		}
		t.Stop()
		rs := make([]*trajectory.Result, len(batch))
		for i, c := range batch {
			rs[i] = c.r
		}
		err := b.db.Update(func(tx *bolt.Tx) error { return writeTx(tx, rs) })
		b.batches.Add(1)
		if err != nil && len(batch) > 1 {
			// As db.Batch does: each on its own, so one result the file
			// refuses does not fail the others.
			for _, c := range batch {
				c.answer(b, b.db.Update(func(tx *bolt.Tx) error { return writeTx(tx, []*trajectory.Result{c.r}) }))
			}
			continue
		}
		for _, c := range batch {
			c.answer(b, err)
		}
	}
}

// answer publishes c's result if it was written, then wakes its Finish.
func (c *commitReq) answer(b *Bolt, err error) {
	if err == nil {
		b.pubMu.Lock()
		c.dropped = b.publishLocked(c.r.Seq, c.r)
		b.pubMu.Unlock()
		c.published = true
	}
	c.done <- err
}

// commit writes r in the next batch and waits for it; on success r is
// published, and the results the retention limit then let go of returned.
func (b *Bolt) commit(r *trajectory.Result) (published bool, dropped []*trajectory.Result, err error) {
	c := &commitReq{r: r, done: make(chan error, 1)}
	b.closeMu.RLock()
	if b.closed {
		b.closeMu.RUnlock()
		return false, nil, errClosed
	}
	b.commits <- c
	b.closeMu.RUnlock()
	err = <-c.done
	return c.published, c.dropped, err
}

var errClosed = errors.New("store closed")

func seqKey(n uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], n)
	return k[:]
}

// Submit implements Store.
func (b *Bolt) Submit(ps []Pending, key *Keyed) error {
	if err := b.Healthy(); err != nil {
		return err
	}
	err := b.submit(ps, key)
	if err != nil && !errors.Is(err, ErrKeyExists) {
		b.markFault(err)
	}
	return err
}

func (b *Bolt) submit(ps []Pending, key *Keyed) error {
	// Hashed out here: Batch may run its function more than once. A group's
	// samples share one task (the same bytes): hashed once.
	ps = slices.Clone(ps)
	var last []byte
	ref := ""
	for i := range ps {
		if ps[i].Task == nil {
			continue
		}
		if !SameTask(ps[i].Task, last) {
			last, ref = ps[i].Task, TaskRefOf(ps[i].Task)
		}
		ps[i].TaskRef = ref
	}
	return b.db.Batch(func(tx *bolt.Tx) error {
		if key != nil {
			ik := tx.Bucket(bIdem)
			if !key.Replace && ik.Get([]byte(key.Key)) != nil {
				return fmt.Errorf("%w: %q", ErrKeyExists, key.Key)
			}
			sub := key.Sub
			sub.At = time.Now()
			v, err := json.Marshal(sub)
			if err != nil {
				return err
			}
			if err := ik.Put([]byte(key.Key), v); err != nil {
				return err
			}
		}
		bk := tx.Bucket(bPending)
		for _, p := range ps {
			if p.TaskRef != "" {
				if err := refTask(tx, p.TaskRef, p.Task, 1); err != nil {
					return err
				}
			}
			v, err := json.Marshal(p)
			if err != nil {
				return err
			}
			if err := bk.Put([]byte(p.ID), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// refTask adds delta to the count of pending records naming ref: the task
// is written with its first and deleted with its last.
func refTask(tx *bolt.Tx, ref string, task []byte, delta int) error {
	rc, k := tx.Bucket(bTaskRC), []byte(ref)
	var n uint64
	if v := rc.Get(k); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	switch {
	case delta > 0:
		if n == 0 || tx.Bucket(bTasks).Get(k) == nil {
			if err := tx.Bucket(bTasks).Put(k, task); err != nil {
				return err
			}
		}
		n += uint64(delta)
	case n <= uint64(-delta):
		// The last record naming it (or a count lost to damage): gone.
		if err := tx.Bucket(bTasks).Delete(k); err != nil {
			return err
		}
		return rc.Delete(k)
	default:
		n -= uint64(-delta)
	}
	return rc.Put(k, seqKey(n))
}

// Unfinished implements Store. A task several records name is given
// back as one copy; a record whose task is missing (a damaged file) comes
// back without it, for the caller to report.
func (b *Bolt) Unfinished() ([]Pending, error) {
	var out []Pending
	err := b.db.View(func(tx *bolt.Tx) error {
		tasks := map[string]json.RawMessage{}
		return tx.Bucket(bPending).ForEach(func(k, v []byte) error {
			var p Pending
			if err := decode(v, &p); err != nil {
				return fmt.Errorf("pending rollout %s: %w", k, err)
			}
			if p.TaskRef != "" {
				t, ok := tasks[p.TaskRef]
				if !ok {
					if v := tx.Bucket(bTasks).Get([]byte(p.TaskRef)); v != nil {
						t = bytes.Clone(v)
					}
					tasks[p.TaskRef] = t
				}
				p.Task = t
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// Retry implements Store.
func (b *Bolt) Retry(id string, attempt int, ended *trajectory.Attempt) error {
	return b.db.Batch(func(tx *bolt.Tx) error {
		found, err := updatePending(tx, id, func(p *Pending) bool {
			p.Attempt = attempt
			if ended != nil {
				p.Attempts = append(p.Attempts, *ended)
			}
			return true
		})
		if err == nil && !found {
			err = fmt.Errorf("no pending rollout %q", id)
		}
		return err
	})
}

// updatePending rewrites a pending record as change leaves it (when it
// returns true); found is false when there is none.
func updatePending(tx *bolt.Tx, id string, change func(*Pending) bool) (found bool, err error) {
	bk := tx.Bucket(bPending)
	v := bk.Get([]byte(id))
	if v == nil {
		return false, nil
	}
	var p Pending
	if err := decode(v, &p); err != nil {
		return true, fmt.Errorf("pending rollout %s: %w: %w", id, errDamaged, err)
	}
	if !change(&p) {
		return true, nil
	}
	nv, err := json.Marshal(p)
	if err != nil {
		return true, err
	}
	return true, bk.Put([]byte(id), nv)
}

type heldCancel struct {
	ids []string
	why trajectory.Failure
}

// ErrHeld: the file refused a write, which is held in memory and made
// when it takes writes again; a crash before then loses it.
var ErrHeld = errors.New("held in memory until the store file takes writes again")

// Cancel implements Store. Refused by the file, it is held (ErrHeld).
func (b *Bolt) Cancel(ids []string, why trajectory.Failure) error {
	c := heldCancel{ids: slices.Clone(ids), why: why}
	err := b.Healthy()
	if err == nil {
		if err = b.db.Batch(func(tx *bolt.Tx) error { return cancelTx(tx, c) }); err == nil {
			return nil
		}
		b.markFault(err)
	}
	return b.holdOp(func() { b.heldCancels = append(b.heldCancels, c) }, err)
}

// errDamaged marks a record that does not decode.
var errDamaged = errors.New("damaged record")

func cancelTx(tx *bolt.Tx, c heldCancel) error {
	for _, id := range c.ids {
		// A rollout finished meanwhile has no record; the first
		// cancellation is the one reported.
		_, err := updatePending(tx, id, func(p *Pending) bool {
			if p.Cancelled != nil {
				return false
			}
			p.Cancelled = &c.why
			return true
		})
		if errors.Is(err, errDamaged) {
			// Not recordable, and no reason to fail the others (or, held,
			// the results written with them).
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// holdOp keeps a cancellation or a value the file refused (add, under
// faultMu) for the healer to write; it returns cause as ErrHeld.
func (b *Bolt) holdOp(add func(), cause error) error {
	b.faultMu.Lock()
	add()
	b.healLocked()
	b.faultMu.Unlock()
	return fmt.Errorf("%w: %w", ErrHeld, cause)
}

// Finish implements Store: the result and the end of the pending record in
// one transaction, then publication.
func (b *Bolt) Finish(r *trajectory.Result) error {
	b.mu.Lock()
	b.seq++
	seq := b.seq
	b.mu.Unlock()
	r.Seq = seq
	v, err := trajectory.MarshalResult(r)
	if err != nil {
		b.publish(seq, nil)
		return fmt.Errorf("store result %s: %w", r.ID, err)
	}
	r.Encoded = v
	b.faultMu.Lock()
	faulted := b.fault != nil
	b.faultMu.Unlock()
	published, dropped := false, []*trajectory.Result(nil)
	if faulted {
		err = errFault
	} else {
		published, dropped, err = b.commit(r)
	}
	if err != nil {
		// Held, not lost: visible now, written when the file takes writes
		// again. Its pending record stays until then, so a crash before
		// that re-runs it.
		if herr := b.hold(r, err); herr != nil {
			b.publish(seq, nil)
			return fmt.Errorf("store result %s: %w", r.ID, herr)
		}
	}
	if !published {
		b.publish(seq, r)
	} else if len(dropped) > 0 {
		b.forget(dropped) // the retention limit, on disk too
	}
	// Return only once the result is visible: a caller that then tells
	// waiters the rollout is done must not have them find nothing. Earlier
	// numbers are committing now (or fail and are skipped), so this is short.
	b.pubMu.Lock()
	if b.published >= seq {
		b.pubMu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	b.waiting[seq] = ch
	b.pubMu.Unlock()
	<-ch
	return nil
}

var errFault = errors.New("store in fault")

// writeTx writes results: each with its marks and index entry, its
// pending record gone, and the last sequence number.
func writeTx(tx *bolt.Tx, rs []*trajectory.Result) error {
	var top uint64
	var now time.Time
	for _, r := range rs {
		if len(r.Marks) > 0 && now.IsZero() {
			now = time.Now()
		}
		for _, m := range r.Marks {
			if !json.Valid(m.Value) {
				// A host bug: the result matters more than its mark, and an
				// error here would hold it unwritten forever.
				continue
			}
			v, err := json.Marshal(Submission{At: now, Note: m.Value})
			if err != nil {
				return fmt.Errorf("mark %s: %w", m.Key, err)
			}
			if err := tx.Bucket(bIdem).Put([]byte(m.Key), v); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bResults).Put(seqKey(r.Seq), r.Encoded); err != nil {
			return err
		}
		if err := tx.Bucket(bIndex).Put([]byte(r.ID), seqKey(r.Seq)); err != nil {
			return err
		}
		if err := deletePending(tx, r.ID); err != nil {
			return err
		}
		top = max(top, r.Seq)
	}
	meta := tx.Bucket(bMeta)
	if cur := meta.Get(keySeq); len(cur) == 8 && binary.BigEndian.Uint64(cur) >= top {
		return nil
	}
	return meta.Put(keySeq, seqKey(top))
}

// deletePending removes a pending record and its claim on its task.
func deletePending(tx *bolt.Tx, id string) error {
	bk := tx.Bucket(bPending)
	v := bk.Get([]byte(id))
	if v == nil {
		return nil
	}
	if ref := taskRefOf(v); ref != "" {
		if err := refTask(tx, ref, nil, -1); err != nil {
			return err
		}
	}
	return bk.Delete([]byte(id))
}

// taskRefOf reads a pending record's task ref from its first bytes:
// Submit writes it first, and a record without one (a task of one sample,
// or a record of a host before tasks were stored apart) names none. A
// damaged record names none either and is deleted all the same: the result
// written in its place is what counts (store check reports a count left).
func taskRefOf(v []byte) string {
	const head = `{"task_ref":"sha256:`
	if n := len(head) + 64; len(v) > n && string(v[:len(head)]) == head && v[n] == '"' {
		return string(v[len(head)-len("sha256:") : n])
	}
	return ""
}

// hold keeps a result the file refused and makes sure a healer runs.
func (b *Bolt) hold(r *trajectory.Result, cause error) error {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	if len(b.unwritten) >= maxUnwritten {
		return fmt.Errorf("%d results already held unwritten: %w", len(b.unwritten), cause)
	}
	if !errors.Is(cause, errFault) {
		b.fault = cause
	}
	b.unwritten = append(b.unwritten, r)
	b.healLocked()
	return nil
}

// markFault records a write the file refused outside Finish (a
// submission), so that readiness reports it until a write goes through.
func (b *Bolt) markFault(err error) {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	if b.fault == nil {
		b.fault = err
	}
	b.healLocked()
}

func (b *Bolt) healLocked() {
	if !b.healing {
		b.healing = true
		b.healers.Add(1)
		go b.heal()
	}
}

// heal retries with backoff until the held results are written (or, with
// none held, until a probe write goes through), then clears the fault.
func (b *Bolt) heal() {
	defer b.healers.Done()
	backoff := 20 * time.Millisecond
	for {
		select {
		case <-time.After(backoff):
		case <-b.stop:
			// Close makes the last attempt; the file is gone after it.
			b.faultMu.Lock()
			b.healing = false
			b.faultMu.Unlock()
			return
		}
		n, err := b.writeHeld()
		if n == 0 && err == nil {
			err = b.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bMeta).Put([]byte("probe"), seqKey(uint64(time.Now().UnixNano())))
			})
		}
		b.faultMu.Lock()
		if err != nil {
			b.fault = err
			b.faultMu.Unlock()
			backoff = min(backoff*2, 500*time.Millisecond)
			continue
		}
		if b.heldLocked() == 0 {
			b.fault, b.healing = nil, false
			b.faultMu.Unlock()
			return
		}
		b.faultMu.Unlock()
	}
}

// writeHeld writes what a fault holds (results, then cancellations and
// host values) in one transaction and, once it is on disk, lets go of it
// (what was held meanwhile stays); n is how much it took.
func (b *Bolt) writeHeld() (n int, err error) {
	b.faultMu.Lock()
	rs := slices.Clone(b.unwritten)
	cs := slices.Clone(b.heldCancels)
	st := maps.Clone(b.heldState)
	b.faultMu.Unlock()
	n = len(rs) + len(cs) + len(st)
	if n == 0 {
		return 0, nil
	}
	err = b.db.Update(func(tx *bolt.Tx) error {
		if len(rs) > 0 {
			if err := writeTx(tx, rs); err != nil {
				return err
			}
		}
		for _, c := range cs {
			if err := cancelTx(tx, c); err != nil {
				return err
			}
		}
		for name, v := range st {
			if err := tx.Bucket(bMeta).Put(stateKey(name), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	b.faultMu.Lock()
	b.unwritten = b.unwritten[len(rs):]
	b.heldCancels = b.heldCancels[len(cs):]
	for name, v := range st {
		if bytes.Equal(b.heldState[name], v) { // not set again meanwhile
			delete(b.heldState, name)
		}
	}
	b.faultMu.Unlock()
	return n, nil
}

// heldLocked is how much a fault holds; faultMu is held.
func (b *Bolt) heldLocked() int { return len(b.unwritten) + len(b.heldCancels) + len(b.heldState) }

// Healthy implements Store: nil, or why the file does not take writes.
func (b *Bolt) Healthy() error {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	if b.fault != nil {
		return fmt.Errorf("store cannot write (%d results, %d cancellations and %d host values held in memory until it can): %w",
			len(b.unwritten), len(b.heldCancels), len(b.heldState), b.fault)
	}
	return nil
}

// Held is the number of finished results not yet durable.
func (b *Bolt) Held() int {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	return len(b.unwritten)
}

// publish makes committed results visible in sequence order.
func (b *Bolt) publish(seq uint64, r *trajectory.Result) {
	b.pubMu.Lock()
	dropped := b.publishLocked(seq, r)
	b.pubMu.Unlock()
	if len(dropped) > 0 {
		b.forget(dropped) // the retention limit, on disk too
	}
}

// publishLocked is publish under pubMu; it returns the results the
// retention limit let go of, for the caller to forget once unlocked.
func (b *Bolt) publishLocked(seq uint64, r *trajectory.Result) (dropped []*trajectory.Result) {
	b.held[seq] = r
	for {
		next, ok := b.held[b.published+1]
		if !ok {
			return dropped
		}
		delete(b.held, b.published+1)
		b.published++
		if next != nil {
			dropped = append(dropped, b.mem.add(next)...)
		}
		if ch, ok := b.waiting[b.published]; ok { // after add: visible when woken
			close(ch)
			delete(b.waiting, b.published)
		}
	}
}

func (b *Bolt) forget(rs []*trajectory.Result) {
	_ = b.db.Batch(func(tx *bolt.Tx) error {
		for _, r := range rs {
			_ = tx.Bucket(bResults).Delete(seqKey(r.Seq))
			_ = tx.Bucket(bIndex).Delete([]byte(r.ID))
		}
		return nil
	})
}

// Get implements Store.
func (b *Bolt) Get(id string) (*trajectory.Result, bool) { return b.mem.Get(id) }

// Finished implements Store.
func (b *Bolt) Finished(f Filter) ([]*trajectory.Result, uint64) { return b.mem.Finished(f) }

// Changed implements Store.
func (b *Bolt) Changed() <-chan struct{} { return b.mem.Changed() }

// Ack implements Store: gone from disk first, then from view. While the
// store is in fault nothing is acknowledged (held results are not on disk
// to delete, and their pending records must go first).
func (b *Bolt) Ack(ids []string) (int, error) {
	if err := b.Healthy(); err != nil {
		return 0, err
	}
	err := b.db.Batch(func(tx *bolt.Tx) error {
		idx, res := tx.Bucket(bIndex), tx.Bucket(bResults)
		for _, id := range ids {
			k := idx.Get([]byte(id))
			if k == nil {
				continue
			}
			if err := res.Delete(k); err != nil {
				return err
			}
			if err := idx.Delete([]byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.markFault(err)
		return 0, err
	}
	n, _ := b.mem.Ack(ids)
	return n, nil
}

// stateKey is a host value's key in the meta bucket, apart from "seq".
func stateKey(name string) []byte { return []byte("state:" + name) }

// SetState implements Store. Refused by the file, the value is held
// (ErrHeld), and State reads it back meanwhile.
func (b *Bolt) SetState(name string, v []byte) error {
	v = bytes.Clone(v)
	err := b.Healthy()
	if err == nil {
		if err = b.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put(stateKey(name), v) }); err == nil {
			return nil
		}
		b.markFault(err)
	}
	return b.holdOp(func() {
		if b.heldState == nil {
			b.heldState = map[string][]byte{}
		}
		b.heldState[name] = v
	}, err)
}

// State implements Store.
func (b *Bolt) State(name string) ([]byte, bool) {
	b.faultMu.Lock()
	held, ok := b.heldState[name]
	b.faultMu.Unlock()
	if ok {
		return bytes.Clone(held), true
	}
	var v []byte
	_ = b.db.View(func(tx *bolt.Tx) error {
		v = bytes.Clone(tx.Bucket(bMeta).Get(stateKey(name)))
		return nil
	})
	return v, v != nil
}

// Idempotent implements Store.
func (b *Bolt) Idempotent(key string) (Submission, bool) {
	var s Submission
	found := false
	_ = b.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bIdem).Get([]byte(key)); v != nil {
			found = decode(v, &s) == nil
		}
		return nil
	})
	return s, found
}

// Marks implements Store.
func (b *Bolt) Marks(prefix string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	_ = b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bIdem).Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			var s Submission
			if decode(v, &s) == nil {
				out[string(k)] = bytes.Clone(s.Note)
			} else {
				out[string(k)] = nil // damaged: present, its value unknown
			}
		}
		return nil
	})
	return out
}

// ExpireKeys implements Store. A key recorded before keys had a time (no
// At) is given one now, so it expires a lifetime from now, not never. The
// walk is a read transaction: over 640,000 keys it took 2.3 s in a write
// one, holding every submission and result commit behind it (1.0 s read).
func (b *Bolt) ExpireKeys(before time.Time) (int, error) {
	var old, undated [][]byte
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bIdem).ForEach(func(k, v []byte) error {
			switch at, ok := keyTime(v); {
			case !ok || !at.IsZero() && at.Before(before):
				old = append(old, bytes.Clone(k)) // damaged records too: none can answer a retry
			case at.IsZero():
				undated = append(undated, bytes.Clone(k))
			}
			return nil
		})
	})
	if err != nil || len(old)+len(undated) == 0 {
		return 0, err
	}
	n := 0
	err = b.db.Update(func(tx *bolt.Tx) error {
		n = 0
		bk := tx.Bucket(bIdem)
		for _, k := range old {
			// Looked at again: gone since the walk, or expired and taken
			// anew (or replaced), it is not counted or deleted.
			v := bk.Get(k)
			if v == nil {
				continue
			}
			if at, ok := keyTime(v); ok && (at.IsZero() || !at.Before(before)) {
				continue
			}
			if err := bk.Delete(k); err != nil {
				return err
			}
			n++
		}
		now := time.Now()
		for _, k := range undated {
			var s Submission
			if v := bk.Get(k); v == nil || decode(v, &s) != nil || !s.At.IsZero() {
				continue
			}
			s.At = now
			v, err := json.Marshal(s)
			if err != nil {
				return err
			}
			if err := bk.Put(k, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("expire idempotency keys: %w", err)
	}
	return n, nil
}

// keyTime is a key record's time; ok is false for a damaged record (or none).
func keyTime(v []byte) (at time.Time, ok bool) {
	if v == nil {
		return time.Time{}, false
	}
	var s struct {
		At time.Time `json:"at"`
	}
	if err := decode(v, &s); err != nil {
		return time.Time{}, false
	}
	return s.At, true
}

// Stats implements Store.
func (b *Bolt) Stats() Stats { return b.mem.Stats() }

// Size is the store file's size in bytes.
func (b *Bolt) Size() int64 {
	var n int64
	_ = b.db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

// Check verifies the file's structure and that the index and results agree.
func (b *Bolt) Check() error {
	return b.db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		idx, res := tx.Bucket(bIndex), tx.Bucket(bResults)
		_ = idx.ForEach(func(id, k []byte) error {
			v := res.Get(k)
			if v == nil {
				errs = append(errs, fmt.Errorf("index %s points at missing result %x", id, k))
				return nil
			}
			var head struct {
				ID string `json:"id"`
			}
			if decode(v, &head) != nil || head.ID != string(id) {
				errs = append(errs, fmt.Errorf("result %x is not rollout %s", k, id))
			}
			return nil
		})
		if n, m := idx.Stats().KeyN, res.Stats().KeyN; n != m {
			errs = append(errs, fmt.Errorf("%d index entries for %d results", n, m))
		}
		named := map[string]uint64{} // task ref -> pending records naming it
		_ = tx.Bucket(bPending).ForEach(func(id, v []byte) error {
			if idx.Get(id) != nil {
				errs = append(errs, fmt.Errorf("rollout %s is both pending and finished", id))
			}
			var p Pending
			switch {
			case decode(v, &p) != nil:
				errs = append(errs, fmt.Errorf("pending rollout %s does not decode", id))
			case p.TaskRef != "":
				named[p.TaskRef]++
				if tx.Bucket(bTasks).Get([]byte(p.TaskRef)) == nil {
					errs = append(errs, fmt.Errorf("pending rollout %s names task %s, which is missing", id, p.TaskRef))
				}
			}
			return nil
		})
		// Records of hosts before tasks were stored apart hold their task
		// in the request and name none: both kinds are read.
		_ = tx.Bucket(bTasks).ForEach(func(k, v []byte) error {
			if named[string(k)] == 0 {
				errs = append(errs, fmt.Errorf("task %s is named by no pending rollout", k))
			} else if TaskRefOf(v) != string(k) {
				errs = append(errs, fmt.Errorf("task %s does not hash to its name", k))
			}
			return nil
		})
		_ = tx.Bucket(bTaskRC).ForEach(func(k, v []byte) error {
			if len(v) != 8 || binary.BigEndian.Uint64(v) != named[string(k)] {
				errs = append(errs, fmt.Errorf("task %s is counted %x, named by %d pending rollouts", k, v, named[string(k)]))
			}
			return nil
		})
		for ref := range named {
			if tx.Bucket(bTaskRC).Get([]byte(ref)) == nil {
				errs = append(errs, fmt.Errorf("task %s is named by %d pending rollouts and has no count", ref, named[ref]))
			}
		}
		return errors.Join(errs...)
	})
}

// Close implements Store.
func (b *Bolt) Close() error {
	b.closeMu.Lock()
	if !b.closed {
		b.closed = true
		close(b.commits) // the loop commits what it holds, then ends
		close(b.stop)    // healers give up; the last attempt is below
	}
	b.closeMu.Unlock()
	<-b.loopDone
	b.healers.Wait()
	// One last try for results held by a fault: written now they are not
	// run again after a restart (their pending records say to).
	n, err := b.writeHeld()
	if err != nil {
		err = fmt.Errorf("store: %d finished results, cancellations and host values not written at close (those rollouts run again after a restart): %w", n, err)
	}
	return errors.Join(err, b.db.Close())
}
