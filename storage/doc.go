// Package storage is the durable partition log in Apache Kafka's on-disk
// format: segments (.log, .index, .timeindex, .txnindex), the leader-epoch
// checkpoint, producer-state snapshots, the log-start-offset checkpoint,
// roll/retention/truncation, recovery after crashes, and the flush policy
// with group commit.
//
// It offers two append paths: leader append (offsets assigned, producer
// checks as Kafka's leader does them) and verbatim append (the batch keeps
// its offsets, as Kafka's follower append). All I/O goes through FS so that
// crashes and I/O errors can be injected. It must not know about the wire
// protocol or about topic policy.
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
//	.verbatim_cleanshutdown         present only while the Log is closed cleanly
//
// Segment files are named by the base offset of their first batch (20
// digits). Index files never contain preallocated space. Index entries follow
// Kafka's LogSegment rules (see index.go).
//
// # Durability model
//
// Data is written with one pwrite per record set (per segment chunk).
// Rolling a segment writes and syncs its indexes and its log before the next
// segment is created (and the directory synced), so after a crash only the
// last segment can have a torn or zero-filled tail; recovery validates it
// batch by batch. Checkpoints are written atomically (temporary file, sync,
// rename, directory sync). Under FlushAlways the flusher goroutine
// group-commits the active segment; callers wait with OnDurable or
// WaitDurable. A failed sync takes the partition offline until it is
// reopened.
//
// # File map
//
//	fs.go, osfs*.go, memfs.go   the filesystem interface, the real one, the crash simulator
//	log.go                      Log, Config, accessors, Close
//	log_append.go               AppendLeader, AppendCoordinator, AppendVerbatim, roll
//	log_read.go                 Read, ReadBounded, OffsetForTimestamp, MaxTimestamp
//	log_truncate.go             Truncate, TruncateFullyAndStartAt, DeleteRecords, ApplyRetention
//	log_producer.go             glue to producer state and transaction indexes, LSO
//	flush.go                    flush policies and group commit
//	recovery.go                 Open and crash recovery
//	segment.go, index.go        segments and the offset/time indexes
//	checkpoint.go               the log-start-offset checkpoint
//	epochcache*.go              leader-epoch cache and its checkpoint
//	producerstate*.go           producer state, snapshots, control records
//	txnindex.go                 transaction index
package storage
