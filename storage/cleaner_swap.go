package storage

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// The cleaner's file protocol (Kafka's .cleaned / .swap / .deleted
// suffixes). For a group of segments [B, E) cleaned into one segment
// named B:
//
//  1. B.log.cleaned and its B.index.cleaned, B.timeindex.cleaned and
//     (when it has entries) B.txnindex.cleaned are written and synced;
//     the directory is synced.
//  2. The rolled-segments record is rewritten without the group's
//     segments (they are below the recovery point), then
//     cleaner-swap-checkpoint records "B E" (both atomically).
//  3. The index files are renamed .cleaned -> .swap, then the log; the
//     directory is synced. The durable B.log.swap is the commit point.
//  4. Every file of every old segment is renamed to .deleted.
//  5. B.log.swap is renamed to B.log, then the index files; the
//     directory is synced.
//  6. The log switches to the new segment (the old files stay open for
//     reads in progress, file.delete.delay.ms), the .deleted files and
//     the swap record are removed.
//
// Recovery (recoverCleanerFiles, before anything else at Open):
//
//   - B.log.swap present: the swap committed. Every segment file whose
//     base is in [B, E) goes (E from the swap record; without one, Kafka's
//     rule: the end of the swap segment), each index file is taken from
//     its .swap, else its .cleaned (both were synced before step 3), and
//     B.log.swap becomes B.log.
//   - else an index .swap of B without B.log.cleaned: step 5 was under
//     way (the log already renamed): the index .swap files are renamed.
//   - everything else with a .cleaned, .swap or .deleted suffix is
//     removed by the ordinary stray-file rule (a clean that did not
//     commit, or old segments already replaced).

var cleanerIndexSuffixes = []string{indexSuffix, timeIndexSuffix, TxnIndexSuffix}
var segmentSuffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, TxnIndexSuffix}

// cleanGroup writes the cleaned segment of group g and swaps it in.
func (c *Cleaner) cleanGroup(l *Log, g []segView, f *batchFilter, interval int64, st *CleanStats) error {
	fs, dir := l.fs, l.dir
	b0, end := g[0].base, g[len(g)-1].next
	aborted, err := l.AbortedTransactions(b0, end, nil)
	if err != nil {
		return err
	}
	t := newTxnTracker(aborted, f.committed)
	name := func(suf string) string { return dir + "/" + SegmentFileName(b0, suf) }
	removeCleaned := func() {
		for _, suf := range segmentSuffixes {
			fs.Remove(name(suf + cleanedSuffix))
		}
	}
	lf, err := fs.OpenFile(name(logSuffix+cleanedSuffix), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if lf != nil {
			lf.Close()
		}
		if !ok {
			removeCleaned()
		}
	}()
	cs := &segment{fs: fs, dir: dir, base: b0, next: b0, maxTs: -1, maxTsOffset: b0, rollTs: -1,
		lastBatchPos: -1, indexInterval: interval, indexesLoaded: true}
	cs.offIdx.base, cs.timeIdx.base = b0, b0
	var pos int64 // file position of writeBuf[0]
	c.writeBuf = c.writeBuf[:0]
	flush := func() error {
		if len(c.writeBuf) == 0 {
			return nil
		}
		if _, err := lf.WriteAt(c.writeBuf, pos); err != nil {
			return err
		}
		c.throttle.Done(int64(len(c.writeBuf)))
		st.BytesWritten += int64(len(c.writeBuf))
		pos += int64(len(c.writeBuf))
		c.writeBuf = c.writeBuf[:0]
		return nil
	}
	for _, s := range g {
		st.BytesRead += s.size
		err := c.readBatches(l, s, func(b []byte, h *kbatch.Header) (bool, error) {
			n := len(c.writeBuf)
			out, err := f.filter(c.writeBuf, b, t)
			if err != nil {
				return false, uncleanable(l, h.BaseOffset, err)
			}
			c.writeBuf = out
			if len(out) > n {
				nb := out[n:]
				cs.noteBatch(pos+int64(n), int64(len(nb)), kbatch.BaseOffset(nb)+int64(kbatch.LastOffsetDelta(nb)), kbatch.MaxTimestamp(nb))
			}
			if len(c.writeBuf) >= 1<<20 {
				return true, flush()
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := lf.Sync(); err != nil {
		return err
	}
	cs.onRoll()
	var txn []byte
	for _, a := range t.cleanedIndex {
		txn = AppendAbortedTxn(txn, a)
	}
	for _, w := range []struct {
		suf  string
		data []byte
	}{{indexSuffix, cs.offIdx.buf}, {timeIndexSuffix, cs.timeIdx.buf}, {TxnIndexSuffix, txn}} {
		if w.suf == TxnIndexSuffix && len(w.data) == 0 {
			continue // Kafka creates a transaction index only for entries
		}
		if err := writeSynced(fs, name(w.suf+cleanedSuffix), w.data); err != nil {
			return err
		}
	}
	if err := fs.SyncDir(dir); err != nil {
		return err
	}
	lf.Close()
	lf = nil
	ok = true
	if err := l.swapIn(g, b0, end, len(txn) > 0); err != nil {
		if errors.Is(err, errCleanAborted) {
			removeCleaned()
		}
		return err
	}
	return nil
}

func writeSynced(fs FS, name string, data []byte) error {
	w, err := fs.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer w.Close()
	if len(data) > 0 {
		if _, err := w.WriteAt(data, 0); err != nil {
			return err
		}
	}
	return w.Sync()
}

func renameIfExists(fs FS, from, to string) error {
	if err := fs.Rename(from, to); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// swapIn replaces the group's segments with the cleaned segment b0
// (steps 2-6 above) under syncMu and mu: appends wait for the renames,
// not for the clean. A group that is no longer in the log as viewed
// (truncated, deleted by retention) aborts the swap.
func (l *Log) swapIn(g []segView, b0, end int64, hasTxn bool) error {
	if err := l.lockRewrite(); err != nil {
		return err
	}
	defer l.unlockRewrite()
	i := -1
	for k, s := range l.segs {
		if s == g[0].s {
			i = k
		}
	}
	if i < 0 || i+len(g) >= len(l.segs) {
		return errCleanAborted
	}
	for k := range g {
		if l.segs[i+k] != g[k].s || l.segs[i+k].size != g[k].size {
			return errCleanAborted
		}
	}
	fs, dir := l.fs, l.dir
	name := func(base int64, suf string) string { return dir + "/" + SegmentFileName(base, suf) }
	// The rolled-segments record may still list an old segment of the
	// group (entries below the recovery point are dropped only when the
	// record is next written): recovery would take the smaller cleaned
	// segment for one that lost its tail. It is rewritten first.
	if err := l.writeRolledSegmentsLocked(); err != nil {
		return err
	}
	if err := AtomicWriteFile(fs, dir+"/"+cleanerSwapFile, encodeSwapRecord(b0, end)); err != nil {
		return err // nothing renamed yet: the clean is abandoned
	}
	idx := []string{indexSuffix, timeIndexSuffix}
	if hasTxn {
		idx = append(idx, TxnIndexSuffix)
	}
	for _, suf := range idx {
		if err := fs.Rename(name(b0, suf+cleanedSuffix), name(b0, suf+swapSuffix)); err != nil {
			return l.failLocked("cleaner swap", err)
		}
	}
	if err := fs.Rename(name(b0, logSuffix+cleanedSuffix), name(b0, logSuffix+swapSuffix)); err != nil {
		return l.failLocked("cleaner swap", err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return l.failLocked("cleaner swap", err)
	}
	for _, v := range g {
		for _, suf := range segmentSuffixes {
			if err := renameIfExists(fs, name(v.base, suf), name(v.base, suf+deletedSuffix)); err != nil {
				return l.failLocked("cleaner swap", err)
			}
		}
	}
	if err := fs.Rename(name(b0, logSuffix+swapSuffix), name(b0, logSuffix)); err != nil {
		return l.failLocked("cleaner swap", err)
	}
	for _, suf := range idx {
		if err := fs.Rename(name(b0, suf+swapSuffix), name(b0, suf)); err != nil {
			return l.failLocked("cleaner swap", err)
		}
	}
	if err := fs.SyncDir(dir); err != nil {
		return l.failLocked("cleaner swap", err)
	}
	ns, err := openSegment(fs, dir, b0, int64(l.cfg.IndexIntervalBytes), l.cfg.NowMs())
	if err == nil {
		if err = ns.loadRolled(); err == nil {
			err = openTxnIndex(ns)
		}
		if err != nil {
			ns.closeFiles()
		}
	}
	if err != nil {
		return l.failLocked("cleaner swap: opening the cleaned segment", err)
	}
	old := append([]*segment(nil), l.segs[i:i+len(g)]...)
	// Kafka gives the cleaned segment the old segments' latest
	// modification time (retention of segments without timestamps).
	ns.createdMs = 0
	for _, s := range old {
		ns.createdMs = max(ns.createdMs, s.createdMs)
	}
	segs := append(append(append([]*segment(nil), l.segs[:i]...), ns), l.segs[i+len(g):]...)
	l.segs = segs
	for _, s := range old {
		l.dropUnflushedLocked(s)
		l.closeLaterLocked(s)
	}
	for _, v := range g {
		for _, suf := range segmentSuffixes {
			if err := fs.Remove(name(v.base, suf+deletedSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return l.failLocked("cleaner: removing replaced segment", err)
			}
		}
	}
	fs.Remove(dir + "/" + cleanerSwapFile)
	return nil
}

// recoverCleanerFiles completes a swap that committed (see the protocol
// above) before Open reads the directory. What did not commit is left to
// the stray-file rule.
func recoverCleanerFiles(fs FS, dir string) error {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return err
	}
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	recBase, recEnd := int64(-1), int64(-1)
	if b, ok, err := readWholeFile(fs, dir+"/"+cleanerSwapFile); err != nil {
		return err
	} else if ok {
		if base, end, err := decodeSwapRecord(b); err == nil {
			recBase, recEnd = base, end
		}
	}
	path := func(n string) string { return dir + "/" + n }
	changed := false
	for _, n := range names {
		b0, ok := parseSegmentFileName(n, logSuffix+swapSuffix)
		if !ok {
			continue
		}
		end := recEnd
		if recBase != b0 {
			if end, err = swapEnd(fs, path(n), b0); err != nil {
				return err
			}
		}
		for _, m := range names {
			for _, suf := range segmentSuffixes {
				if b, ok := parseSegmentFileName(m, suf); ok && b >= b0 && b < max(end, b0+1) {
					if err := fs.Remove(path(m)); err != nil && !errors.Is(err, os.ErrNotExist) {
						return err
					}
				}
			}
		}
		for _, suf := range cleanerIndexSuffixes {
			final := SegmentFileName(b0, suf)
			if has[final+swapSuffix] {
				err = fs.Rename(path(final+swapSuffix), path(final))
			} else if has[final+cleanedSuffix] {
				err = fs.Rename(path(final+cleanedSuffix), path(final))
			}
			if err != nil {
				return err
			}
		}
		if err := fs.Rename(path(n), path(SegmentFileName(b0, logSuffix))); err != nil {
			return err
		}
		changed = true
	}
	for _, n := range names {
		for _, suf := range cleanerIndexSuffixes {
			b0, ok := parseSegmentFileName(n, suf+swapSuffix)
			if !ok || has[SegmentFileName(b0, logSuffix+swapSuffix)] || has[SegmentFileName(b0, logSuffix+cleanedSuffix)] {
				continue
			}
			if err := fs.Rename(path(n), path(strings.TrimSuffix(n, swapSuffix))); err != nil {
				return err
			}
			changed = true
		}
	}
	if changed {
		if err := fs.SyncDir(dir); err != nil {
			return err
		}
	}
	if has[cleanerSwapFile] {
		if err := fs.Remove(path(cleanerSwapFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// swapEnd is the offset after the last whole batch of a swap segment
// (Kafka's readNextOffset), its base when it has none.
func swapEnd(fs FS, name string, base int64) (int64, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := base
	_, err = scanBatches(f, 0, st.Size(), func(pos int64, b []byte) bool {
		end = kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)) + 1
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("storage: reading %s: %w", name, err)
	}
	return end, nil
}
