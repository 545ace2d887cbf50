package storage

import (
	"reflect"
	"testing"
)

func seg(base int64, suffix string) string { return SegmentFileName(base, suffix) }

func TestScanDir(t *testing.T) {
	for _, c := range []struct {
		name  string
		names []string
		want  dirListing
	}{
		{"empty directory", nil, dirListing{}},
		{"clean shutdown, checkpoints and snapshots are not segments",
			[]string{cleanShutdownFile, seg(0, logSuffix), seg(0, indexSuffix), seg(0, timeIndexSuffix), LeaderEpochCheckpointFile,
				RecoveryPointCheckpointFile, "00000000000000000000" + SnapshotSuffix},
			dirListing{cleanMarker: true, bases: []int64{0}}},
		{"bases sorted by offset, not by name order given",
			[]string{seg(200, logSuffix), seg(0, logSuffix), seg(100, logSuffix)},
			dirListing{bases: []int64{0, 100, 200}}},
		{"temporary, deleted, cleaned and swap files are stray; a .log.deleted is no segment",
			[]string{seg(0, logSuffix), LeaderEpochCheckpointFile + ".tmp", seg(5, logSuffix) + deletedSuffix,
				seg(7, logSuffix) + cleanedSuffix, seg(9, indexSuffix) + swapSuffix},
			dirListing{bases: []int64{0}, stray: []string{LeaderEpochCheckpointFile + ".tmp", seg(5, logSuffix) + deletedSuffix,
				seg(7, logSuffix) + cleanedSuffix, seg(9, indexSuffix) + swapSuffix}}},
		{"index files whose log is gone are stray, after the temporary files",
			[]string{seg(0, logSuffix), seg(0, indexSuffix), seg(50, indexSuffix), seg(50, timeIndexSuffix), seg(50, TxnIndexSuffix), "x.tmp"},
			dirListing{bases: []int64{0}, stray: []string{"x.tmp", seg(50, indexSuffix), seg(50, timeIndexSuffix), seg(50, TxnIndexSuffix)}}},
	} {
		if got := scanDir(c.names); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestPlanOpen(t *testing.T) {
	ok := &EpochCache{}
	for _, c := range []struct {
		name string
		sc   diskScan
		want openPlan
	}{
		{"new partition", diskScan{logStart: -1, recoveryPoint: -1, epochs: ok},
			openPlan{emptyAt: 0}},
		{"no segment left, log start checkpointed", diskScan{logStart: 500, recoveryPoint: -1, epochs: ok},
			openPlan{emptyAt: 500}},
		{"stray files are removed", diskScan{dirListing: dirListing{stray: []string{"a.tmp"}, bases: []int64{0}}, logStart: -1, epochs: ok},
			openPlan{remove: []string{"a.tmp"}, emptyAt: -1, open: []int64{0}}},
		{"clean shutdown trusts everything", diskScan{dirListing: dirListing{cleanMarker: true, bases: []int64{0, 100}}, logStart: -1, epochs: ok},
			openPlan{emptyAt: -1, open: []int64{0, 100}, trustAll: true}},
		{"clean shutdown with a corrupt epoch checkpoint trusts nothing blindly",
			diskScan{dirListing: dirListing{cleanMarker: true, bases: []int64{0}}, logStart: -1},
			openPlan{discardEpochs: true, emptyAt: -1, open: []int64{0}}},
		{"segments wholly below the log start are dropped",
			diskScan{dirListing: dirListing{bases: []int64{0, 100, 200}}, logStart: 150, epochs: ok},
			openPlan{emptyAt: -1, dropBelowStart: []int64{0}, open: []int64{100, 200}}},
		{"a log start at a segment base drops the ones before it",
			diskScan{dirListing: dirListing{bases: []int64{0, 100, 200}}, logStart: 100, epochs: ok},
			openPlan{emptyAt: -1, dropBelowStart: []int64{0}, open: []int64{100, 200}}},
		{"the last segment stays even below the log start",
			diskScan{dirListing: dirListing{bases: []int64{0, 100, 200}}, logStart: 900, epochs: ok},
			openPlan{emptyAt: -1, dropBelowStart: []int64{0, 100}, open: []int64{200}}},
	} {
		if got := planOpen(&c.sc); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// TestPlanTrust is a table of on-disk situations: the segments as loading
// them trusted would find them, the shutdown, the recovery point and the
// sizes recorded at rolls; the plan is where validation starts and which
// segments were loaded as trusted on the way.
func TestPlanTrust(t *testing.T) {
	// Three segments of 10 offsets and 1000 bytes each, loading fine.
	good := func() []segProbe {
		return []segProbe{{0, 10, 1000, true}, {10, 20, 1000, true}, {20, 30, 1000, true}}
	}
	with := func(i int, f func(*segProbe)) []segProbe {
		p := good()
		f(&p[i])
		return p
	}
	for _, c := range []struct {
		name       string
		disk       []segProbe
		trustAll   bool
		rp         int64
		rolled     map[int64]rolledSegment
		from       int
		validate   bool
		probedSegs int
	}{
		{name: "clean shutdown, all load", disk: good(), trustAll: true, rp: -1, from: 2, validate: false, probedSegs: 3},
		{name: "clean shutdown, torn active segment", disk: with(2, func(p *segProbe) { p.loaded = false }), trustAll: true, rp: -1,
			from: 2, validate: true, probedSegs: 3},
		{name: "clean shutdown, a rolled segment fails to load", disk: with(1, func(p *segProbe) { p.loaded = false }), trustAll: true, rp: -1,
			from: 1, validate: true, probedSegs: 2},
		{name: "clean shutdown, a segment overlaps the previous one", disk: with(1, func(p *segProbe) { p.base = 5 }), trustAll: true, rp: -1,
			from: 1, validate: true, probedSegs: 2},
		{name: "unclean, recovery point past the rolled segments: the active one is validated", disk: good(), rp: 20,
			from: 2, validate: true, probedSegs: 2},
		{name: "unclean, recovery point inside the second segment", disk: good(), rp: 15, from: 1, validate: true, probedSegs: 2},
		{name: "unclean, no recovery point", disk: good(), rp: -1, from: 0, validate: true, probedSegs: 1},
		{name: "unclean, first segment lost its tail below the recovery point", disk: good(), rp: 20,
			rolled: map[int64]rolledSegment{0: {size: 1500, next: 15}}, from: 0, validate: true, probedSegs: 1},
		{name: "unclean, rolled record matching the disk", disk: good(), rp: 20,
			rolled: map[int64]rolledSegment{0: {size: 1000, next: 10}, 10: {size: 1000, next: 20}}, from: 2, validate: true, probedSegs: 2},
		{name: "unclean, a rolled segment whose indexes do not load", disk: with(0, func(p *segProbe) { p.loaded = false }), rp: 30,
			from: 0, validate: true, probedSegs: 1},
		{name: "one segment, unclean: nothing probed", disk: good()[:1], rp: 100, from: 0, validate: true, probedSegs: 0},
		{name: "one segment, clean", disk: good()[:1], trustAll: true, rp: -1, from: 0, validate: false, probedSegs: 1},
	} {
		probed := 0
		from, validate := planTrust(len(c.disk), c.trustAll, c.rolled, c.rp, func(k int) segProbe {
			if k != probed {
				t.Fatalf("%s: probed segment %d, want %d (in order)", c.name, k, probed)
			}
			probed++
			return c.disk[k]
		})
		if from != c.from || validate != c.validate || probed != c.probedSegs {
			t.Errorf("%s: from %d validate %v after %d probes, want from %d validate %v after %d",
				c.name, from, validate, probed, c.from, c.validate, c.probedSegs)
		}
	}
}

func TestPlanBounds(t *testing.T) {
	for _, c := range []struct {
		name                  string
		first, leo, recovered int64
		logStartCP, rpCP      int64
		clean                 bool
		want                  boundsPlan
	}{
		{"clean", 0, 100, 0, -1, -1, true,
			boundsPlan{restartAt: -1, logStart: 0, snapshotsAbove: -1, recoveryPoint: 100}},
		{"clean, log start checkpointed inside the log", 0, 100, 0, 40, -1, true,
			boundsPlan{restartAt: -1, logStart: 40, snapshotsAbove: -1, recoveryPoint: 100}},
		{"log start checkpoint below the first segment is ignored", 50, 100, 50, 10, -1, true,
			boundsPlan{restartAt: -1, logStart: 50, snapshotsAbove: -1, recoveryPoint: 100}},
		{"log start at the log end", 0, 100, 0, 100, -1, true,
			boundsPlan{restartAt: -1, logStart: 100, snapshotsAbove: -1, recoveryPoint: 100}},
		{"log start above the recovered end restarts the log there", 0, 100, 0, 130, 90, false,
			boundsPlan{restartAt: 130, logStart: 130, snapshotsAbove: -1}},
		{"unclean, recorded recovery point below the end", 0, 100, 60, -1, 80, false,
			boundsPlan{restartAt: -1, logStart: 0, snapshotsAbove: 60, recoveryPoint: 80}},
		{"unclean, recorded recovery point above the recovered end is lowered", 0, 100, 60, -1, 120, false,
			boundsPlan{restartAt: -1, logStart: 0, snapshotsAbove: 60, recoveryPoint: 100, persistRP: true}},
		{"unclean, no recovery point: the first segment's base", 30, 100, 30, -1, -1, false,
			boundsPlan{restartAt: -1, logStart: 30, snapshotsAbove: 30, recoveryPoint: 30}},
	} {
		sc := diskScan{logStart: c.logStartCP, recoveryPoint: c.rpCP}
		if got := planBounds(c.first, c.leo, c.recovered, &sc, c.clean); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// The clean-shutdown marker is removed by every Open that finds it, also
// when the open validated or rebuilt something (a corrupt epoch checkpoint
// here): a marker left behind would make the next crash look clean, and
// that crash's torn tail would be trusted unchecked.
func TestOpenRemovesCleanMarkerWhenNotAllTrusted(t *testing.T) {
	for _, damage := range []string{LeaderEpochCheckpointFile, ""} {
		fs := NewMemFS()
		l := openLog(t, fs, Config{})
		for i := int64(0); i < 3; i++ {
			if _, err := l.AppendVerbatim(testBatch(t, i*10, 1, 1000+i, 10, 20)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if damage != "" {
			if err := AtomicWriteFile(fs, "data/t-0/"+damage, []byte("garbage\n")); err != nil {
				t.Fatal(err)
			}
		}
		l = openLog(t, fs, Config{})
		if _, err := fs.Stat("data/t-0/" + cleanShutdownFile); err == nil {
			t.Fatalf("damage %q: the clean-shutdown marker survived Open", damage)
		}
		if got := l.LogEndOffset(); got != 30 {
			t.Fatalf("damage %q: log end %d, want 30", damage, got)
		}
		l.Close()
	}
}
