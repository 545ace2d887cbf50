// Package storage is the durable partition log in Apache Kafka's on-disk
// format: segments (.log, .index, .timeindex, .txnindex), the leader-epoch
// checkpoint, producer-state snapshots, the log-start-offset checkpoint,
// roll/retention/truncation, log compaction (the cleaner's core: one clean
// of one log; choosing which log to clean is the broker's), recovery after
// crashes, and the flush policy with group commit.
//
// It offers two append paths: leader append (offsets assigned, producer
// checks as Kafka's leader does them) and verbatim append (the batch keeps
// its offsets, as Kafka's follower append). All I/O goes through FS so that
// crashes and I/O errors can be injected. It must not know about the wire
// protocol or about topic policy. It logs nothing: errors are returned
// (wrapping the sentinels of log_errors.go, or a *CorruptBatchError), and
// Config.OnOffline tells the caller when a partition goes offline.
//
// # Partition directory (formats frozen: Kafka tools read them)
//
//	00000000000000000000.log        record batches back to back, as appended
//	00000000000000000000.index      8-byte entries: relative offset int32, position int32
//	00000000000000000000.timeindex  12-byte entries: timestamp int64, relative offset int32
//	00000000000000000000.txnindex   34-byte aborted-transaction entries
//	00000000000000001234.snapshot   producer state at offset 1234 (Kafka's snapshot v1)
//	leader-epoch-checkpoint         "0\n<n>\n<epoch> <start offset>\n..."
//	log-start-offset-checkpoint     "0\n1\n<topic> <partition> <offset>\n"
//	recovery-point-offset-checkpoint "0\n1\n<topic> <partition> <offset>\n"
//	rolled-segments-checkpoint      "0\n<n>\n<base> <size> <end offset>\n..." (Verbatim's own)
//	cleaner-offset-checkpoint       "0\n1\n<topic> <partition> <first dirty offset>\n" (Kafka's format)
//	cleaner-swap-checkpoint         "0\n1\n<base> <end>\n" during a cleaner swap (Verbatim's own)
//	truncation-checkpoint           "0\n1\n<to>\n" during a truncation, completed by Open (Verbatim's own)
//	*.cleaned, *.swap, *.deleted    a cleaner swap in progress (see cleaner_swap.go)
//	.verbatim_cleanshutdown         present only while the Log is closed cleanly
//
// Segment files are named by the base offset of their first batch (20
// digits). Index files never contain preallocated space. Index entries follow
// Kafka's LogSegment rules (see index.go).
//
// # Durability model
//
// Data is written with one pwrite per record set (per segment chunk).
// Checkpoints are written atomically (temporary file, sync, rename,
// directory sync). The leader-epoch checkpoint is written lazily, as
// Kafka's is: an append's new epoch is in memory at once and reaches the
// file before any recovery point is recorded and before a roll's producer
// snapshot (EpochCache.AssignDeferred / SyncDeferred); a crash before that
// leaves it above the recovery point, where recovery re-learns it from the
// batches. A new partition's log writes no empty checkpoint.
//
// A roll does not sync the old segment on the append path. It writes the
// old segment's remaining index entries, records its final size and end
// offset in rolled-segments-checkpoint (durably, before the next segment
// exists), creates the next segment (directory synced) and takes a
// producer snapshot; the flusher goroutine then syncs the old segment's
// log, indexes and transaction index and advances the recovery point, the
// first offset not known durable, recorded in
// recovery-point-offset-checkpoint. Flush and Close sync everything and
// record the recovery point at the log end; a truncation lowers it before
// anything is written again.
//
// After an unclean shutdown (no .verbatim_cleanshutdown) recovery trusts the
// segments whose batches all end below the recovery point (the end recorded
// at the roll, not the one found on disk; indexes checked, rebuilt if
// inconsistent) and validates every later segment batch by batch
// (length, magic, CRC, increasing offsets). At the first invalid batch, or
// at the end of a segment found shorter than recorded at its roll (a tail
// lost at a batch boundary), the log ends: that segment is cut and every
// later segment's files are deleted (directory synced). The leader-epoch
// cache drops the entries at or above the new log end, producer snapshots
// above the first recovered segment go, and producer state and transaction
// indexes are replayed from the newest remaining snapshot. A missing or
// corrupt recovery point validates every segment. A clean shutdown skips
// validation. What recovery kept above the recovery point may have come
// from the page cache: the durable offset starts at the recovery point;
// under FlushAlways Open syncs the rest before returning, under the other
// policies the flusher syncs the recovered rolled segments.
//
// Guarantees: under FlushNever and FlushInterval, a machine crash may lose
// or tear anything above the recovery point (or above the last interval
// sync), and recovery always leaves a whole-batch prefix of what was
// appended. Under FlushAlways the flusher group-commits rolled segments and
// the active segment; callers wait with OnDurable or WaitDurable, and no
// offset they were told is durable is lost. A failed sync takes the
// partition offline until it is reopened.
//
// # File map
//
//	fs.go, osfs*.go, memfs.go   the filesystem interface, the real one, the crash simulator
//	subfs.go                    an FS rooted at a directory of another (the broker's metadata)
//	log.go                      Log, Config, accessors, Close
//	log_append.go               AppendLeader, AppendCoordinator, AppendVerbatim(At), roll
//	log_read.go                 Read, ReadBounded
//	log_lookup.go               OffsetForTimestamp, MaxTimestamp: the one batch a lookup looks
//	                            into is read without the log's lock, charged to the decode
//	                            budget and streamed through kbatch's record reader;
//	                            CorruptBatchError for a stored batch that does not decode
//	log_truncate.go             Truncate, TruncateFullyAndStartAt, DeleteRecords, ApplyRetention
//	log_truncate_intent.go      the truncation record that makes Truncate all or nothing across a crash
//	log_producer.go             glue to producer state and transaction indexes, LSO
//	flush.go                    flush policies, group commit, background sync of rolled segments
//	recoverypoint.go            the recovery point and the rolled-segments record
//	recovery.go                 Open and crash recovery: the apply phase, validation, replay
//	recovery_plan.go            the scan and the pure plan of Open (what to keep, drop, trust, validate)
//	segment_load.go             loading one segment: trusted (indexes checked) or validated batch by batch
//	segment.go, index.go        segments and the offset/time indexes
//	checkpoint.go               the log-start-offset checkpoint
//	epochcache*.go              leader-epoch cache and its checkpoint; the entry a mirror's
//	                            source forwards for its log start (epochcache_source.go)
//	producerstate*.go           producer state, snapshots, control records
//	txnindex.go                 transaction index
//	cleaner.go                  log compaction: the cleanable range, the offset map's build, groups
//	cleaner_filter.go           what a clean keeps of each batch (Kafka's rules), re-encoding
//	cleaner_swap.go             the cleaned segment's files, the swap and its recovery at Open
//	cleaner_map.go              the bounded offset map (dedupe buffer)
//	cleaner_checkpoint.go       cleaner-offset-checkpoint and the swap record
//	cleaner_throttle.go         the cleaner's I/O throttle
package storage
