;; control-records: the built-in policy for control batches, written in
;; WebAssembly text (no runtime, no imports). The Go version next to it
;; (main.go) is the reference implementation: the tests run both over the
;; same batches and require the same verdicts and reasons, byte for byte.
;;
;; On mirror topics it accepts every control batch shape a Kafka log holds:
;; COMMIT/ABORT markers (also when their transaction's start was compacted
;; or trimmed away, and transaction-version-2 markers with bumped epochs),
;; control batches emptied by compaction, and KIP-1279 MIRROR_PID_RESET
;; barriers (type 7) copied from an upstream mirror. It rejects unknown
;; control types, the KRaft-only types 2-6, malformed control records, and
;; attribute combinations Kafka never writes. On ordinary topics it refuses
;; every control batch: only the broker writes markers there.
;;
;; Memory map: 16.. descriptor (NUL-terminated), 960..1000 digit scratch,
;; 1024 + 128*k: reason fragment k (NUL-terminated), 8192.. the input
;; buffer handed out by verbatim_alloc, then the verdict list.
;;
;; Built by policies/build.sh with wabt's wat2wasm.
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "abi=1\0aname=control-records\0aneeds=control-bytes\0aconfigs=\0a\00")
  (data (i32.const 1024) "control batches are written by the broker, not by clients (topic is not a mirror)\00") ;; 0
  (data (i32.const 1152) "attribute bits 0x\00") ;; 1
  (data (i32.const 1280) " are not defined\00") ;; 2
  (data (i32.const 1408) "control batch is compressed\00") ;; 3
  (data (i32.const 1536) "control batch spans \00") ;; 4
  (data (i32.const 1664) " offsets, Kafka writes 1\00") ;; 5
  (data (i32.const 1792) "control batch holds \00") ;; 6
  (data (i32.const 1920) " records, Kafka writes 1\00") ;; 7
  (data (i32.const 2048) "control batch bytes missing\00") ;; 8
  (data (i32.const 2176) "malformed control record: \00") ;; 9
  (data (i32.const 2304) "batch shorter than its header\00") ;; 10
  (data (i32.const 2432) "record length past the end of the batch\00") ;; 11
  (data (i32.const 2560) "malformed record\00") ;; 12
  (data (i32.const 2688) "bad header count\00") ;; 13
  (data (i32.const 2816) "null header key\00") ;; 14
  (data (i32.const 2944) "trailing bytes inside a record\00") ;; 15
  (data (i32.const 3072) "control batch data holds \00") ;; 16
  (data (i32.const 3200) " records, its header says 1\00") ;; 17
  (data (i32.const 3328) "control record offset delta \00") ;; 18
  (data (i32.const 3456) ", want 0\00") ;; 19
  (data (i32.const 3584) "control record key has \00") ;; 20
  (data (i32.const 3712) " bytes, want at least 4\00") ;; 21
  (data (i32.const 3840) "control record key version \00") ;; 22
  (data (i32.const 3968) " is negative\00") ;; 23
  (data (i32.const 4096) "transaction marker in a non-transactional batch\00") ;; 24
  (data (i32.const 4224) "transaction marker without a producer id\00") ;; 25
  (data (i32.const 4352) "transaction marker value has \00") ;; 26
  (data (i32.const 4480) " bytes, want at least 6\00") ;; 27
  (data (i32.const 4608) "transaction marker value version is negative\00") ;; 28
  (data (i32.const 4736) "MIRROR_PID_RESET record has a null value\00") ;; 29
  (data (i32.const 4864) "MIRROR_PID_RESET value shorter than its version\00") ;; 30
  (data (i32.const 4992) "MIRROR_PID_RESET value version is negative\00") ;; 31
  (data (i32.const 5120) "MIRROR_PID_RESET SourceClusterId is malformed\00") ;; 32
  (data (i32.const 5248) "MIRROR_PID_RESET tagged fields are malformed\00") ;; 33
  (data (i32.const 5376) "MIRROR_PID_RESET tag is malformed\00") ;; 34
  (data (i32.const 5504) "MIRROR_PID_RESET tag size is malformed\00") ;; 35
  (data (i32.const 5632) "MIRROR_PID_RESET value has trailing bytes\00") ;; 36
  (data (i32.const 5760) "control type \00") ;; 37
  (data (i32.const 5888) " belongs to the KRaft metadata log, not to a topic partition\00") ;; 38
  (data (i32.const 6016) "unknown control type \00") ;; 39

  ;; verdict list writer
  (global $w (mut i32) (i32.const 0))      ;; next byte of the verdict list
  (global $rs (mut i32) (i32.const 0))     ;; start of the current reason
  (global $count (mut i32) (i32.const 0))  ;; verdicts written
  ;; record reader (a window [$rp, $re) of one record's body)
  (global $rp (mut i32) (i32.const 0))
  (global $re (mut i32) (i32.const 0))
  (global $rerr (mut i32) (i32.const 0))   ;; 0, or the fragment naming the error
  (global $vn (mut i32) (i32.const 0))     ;; bytes the last varint used; <= 0: malformed
  (global $bp (mut i32) (i32.const 0))     ;; last bytes field read: address,
  (global $bl (mut i32) (i32.const 0))     ;; length (0 when null),
  (global $bnull (mut i32) (i32.const 0))  ;; null
  ;; fields of the batch's first record
  (global $od (mut i64) (i64.const 0))
  (global $kp (mut i32) (i32.const 0))
  (global $kl (mut i32) (i32.const 0))
  (global $knull (mut i32) (i32.const 0))
  (global $vp (mut i32) (i32.const 0))
  (global $vl (mut i32) (i32.const 0))
  (global $vnull (mut i32) (i32.const 0))

  (func $strlen (param $a i32) (result i32)
    (local $n i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (i32.load8_u (i32.add (local.get $a) (local.get $n)))))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $next)))
    (local.get $n))

  ;; () -> address<<32 | length of the descriptor
  (func (export "verbatim_describe") (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32))
            (i64.extend_i32_u (call $strlen (i32.const 16)))))

  ;; The input goes at 8192; the verdict list after it is never larger
  ;; than the input (at most ~90 bytes per rejected control batch, whose
  ;; table entry and bytes take at least 144).
  (func (export "verbatim_alloc") (param $n i32) (result i32)
    (local $pages i32)
    (if (i32.gt_u (local.get $n) (i32.const 0x40000000))
      (then unreachable))
    (local.set $pages
      (i32.shr_u
        (i32.add (i32.shl (local.get $n) (i32.const 1)) (i32.const 75263)) ;; 2n + 8192 + 2048 + 65535 - 512
        (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const -1))
          (then unreachable))))
    (i32.const 8192))

  ;; Big-endian to host order.
  (func $be32 (param $a i32) (result i32)
    (i32.or
      (i32.or (i32.shl (i32.load8_u (local.get $a)) (i32.const 24))
              (i32.shl (i32.load8_u offset=1 (local.get $a)) (i32.const 16)))
      (i32.or (i32.shl (i32.load8_u offset=2 (local.get $a)) (i32.const 8))
              (i32.load8_u offset=3 (local.get $a)))))
  (func $be16s (param $a i32) (result i32)
    (i32.extend16_s
      (i32.or (i32.shl (i32.load8_u (local.get $a)) (i32.const 8))
              (i32.load8_u offset=1 (local.get $a)))))

  ;; ---- verdicts

  ;; Starts rejecting batch $i with INVALID_RECORD (87).
  (func $begin (param $i i32)
    (i32.store (global.get $w) (local.get $i))
    (i32.store16 offset=4 (global.get $w) (i32.const 87))
    (global.set $w (i32.add (global.get $w) (i32.const 8)))
    (global.set $rs (global.get $w)))
  (func $end
    (i32.store16 (i32.sub (global.get $rs) (i32.const 2))
                 (i32.sub (global.get $w) (global.get $rs)))
    (global.set $count (i32.add (global.get $count) (i32.const 1))))
  ;; Appends reason fragment $k.
  (func $s (param $k i32)
    (local $a i32) (local $c i32)
    (local.set $a (i32.add (i32.const 1024) (i32.shl (local.get $k) (i32.const 7))))
    (block $done
      (loop $next
        (local.set $c (i32.load8_u (local.get $a)))
        (br_if $done (i32.eqz (local.get $c)))
        (i32.store8 (global.get $w) (local.get $c))
        (global.set $w (i32.add (global.get $w) (i32.const 1)))
        (local.set $a (i32.add (local.get $a) (i32.const 1)))
        (br $next))))
  ;; Appends the digits at [$p, 1000).
  (func $flush (param $p i32)
    (memory.copy (global.get $w) (local.get $p) (i32.sub (i32.const 1000) (local.get $p)))
    (global.set $w (i32.add (global.get $w) (i32.sub (i32.const 1000) (local.get $p)))))
  ;; Appends $x in decimal.
  (func $dec (param $x i64)
    (local $u i64) (local $p i32)
    (local.set $u (local.get $x))
    (if (i64.lt_s (local.get $x) (i64.const 0))
      (then (local.set $u (i64.sub (i64.const 0) (local.get $x)))))
    (local.set $p (i32.const 1000))
    (loop $next
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p)
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $u) (i64.const 10)))))
      (local.set $u (i64.div_u (local.get $u) (i64.const 10)))
      (br_if $next (i64.ne (local.get $u) (i64.const 0))))
    (if (i64.lt_s (local.get $x) (i64.const 0))
      (then
        (local.set $p (i32.sub (local.get $p) (i32.const 1)))
        (i32.store8 (local.get $p) (i32.const 45))))
    (call $flush (local.get $p)))
  ;; Appends $x in lower-case hexadecimal.
  (func $hex (param $x i32)
    (local $p i32) (local $d i32)
    (local.set $p (i32.const 1000))
    (loop $next
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (local.set $d (i32.and (local.get $x) (i32.const 15)))
      (i32.store8 (local.get $p)
        (select (i32.add (i32.const 87) (local.get $d)) (i32.add (i32.const 48) (local.get $d))
                (i32.ge_u (local.get $d) (i32.const 10))))
      (local.set $x (i32.shr_u (local.get $x) (i32.const 4)))
      (br_if $next (local.get $x)))
    (call $flush (local.get $p)))
  ;; A whole reason made of one fragment.
  (func $reject (param $i i32) (param $k i32)
    (call $begin (local.get $i))
    (call $s (local.get $k))
    (call $end))
  ;; fragment, number, fragment
  (func $rejectNum (param $i i32) (param $k1 i32) (param $x i64) (param $k2 i32)
    (call $begin (local.get $i))
    (call $s (local.get $k1))
    (call $dec (local.get $x))
    (if (i32.ge_s (local.get $k2) (i32.const 0))
      (then (call $s (local.get $k2))))
    (call $end))

  ;; ---- varints (the protobuf / Kafka encoding, as Go's encoding/binary)

  ;; Unsigned varint at [$p, $end); $vn = bytes used, <= 0 when malformed.
  (func $uvarint (param $p i32) (param $end i32) (result i64)
    (local $x i64) (local $s i64) (local $i i32) (local $b i32)
    (global.set $vn (i32.const 0))
    (block $out
      (loop $next
        (br_if $out (i32.ge_u (i32.add (local.get $p) (local.get $i)) (local.get $end)))
        (if (i32.eq (local.get $i) (i32.const 10))
          (then
            (global.set $vn (i32.const -11))
            (return (i64.const 0))))
        (local.set $b (i32.load8_u (i32.add (local.get $p) (local.get $i))))
        (if (i32.lt_u (local.get $b) (i32.const 0x80))
          (then
            (if (i32.and (i32.eq (local.get $i) (i32.const 9)) (i32.gt_u (local.get $b) (i32.const 1)))
              (then
                (global.set $vn (i32.const -10))
                (return (i64.const 0))))
            (global.set $vn (i32.add (local.get $i) (i32.const 1)))
            (return (i64.or (local.get $x) (i64.shl (i64.extend_i32_u (local.get $b)) (local.get $s))))))
        (local.set $x (i64.or (local.get $x)
          (i64.shl (i64.extend_i32_u (i32.and (local.get $b) (i32.const 0x7f))) (local.get $s))))
        (local.set $s (i64.add (local.get $s) (i64.const 7)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i64.const 0))
  ;; Signed (zig-zag) varint.
  (func $varint (param $p i32) (param $end i32) (result i64)
    (local $u i64)
    (local.set $u (call $uvarint (local.get $p) (local.get $end)))
    (i64.xor (i64.shr_u (local.get $u) (i64.const 1))
             (i64.sub (i64.const 0) (i64.and (local.get $u) (i64.const 1)))))

  ;; ---- record reader: reads of a failed reader return 0 and keep its error

  (func $rvarint (result i64)
    (local $v i64)
    (if (global.get $rerr) (then (return (i64.const 0))))
    (local.set $v (call $varint (global.get $rp) (global.get $re)))
    (if (i32.le_s (global.get $vn) (i32.const 0))
      (then
        (global.set $rerr (i32.const 12))
        (return (i64.const 0))))
    (global.set $rp (i32.add (global.get $rp) (global.get $vn)))
    (local.get $v))
  ;; A length-prefixed bytes field into $bp/$bl/$bnull (a negative length is null).
  (func $rbytes
    (local $l i64)
    (local.set $l (call $rvarint))
    (global.set $bp (i32.const 0))
    (global.set $bl (i32.const 0))
    (global.set $bnull (i32.const 0))
    (if (i32.or (i32.ne (global.get $rerr) (i32.const 0)) (i64.lt_s (local.get $l) (i64.const 0)))
      (then
        (global.set $bnull (i64.lt_s (local.get $l) (i64.const 0)))
        (return)))
    (if (i64.gt_s (local.get $l) (i64.extend_i32_u (i32.sub (global.get $re) (global.get $rp))))
      (then
        (global.set $rerr (i32.const 12))
        (return)))
    (global.set $bp (global.get $rp))
    (global.set $bl (i32.wrap_i64 (local.get $l)))
    (global.set $rp (i32.add (global.get $rp) (global.get $bl))))

  ;; Decodes the record at [$b, $b+$len): returns the bytes it takes, or 0
  ;; with $rerr naming the error. Leaves its offset delta, key and value in
  ;; $od, $kp/$kl/$knull, $vp/$vl/$vnull.
  (func $record (param $b i32) (param $len i32) (result i32)
    (local $l i64) (local $n i32) (local $nh i64)
    (global.set $rerr (i32.const 0))
    (local.set $l (call $varint (local.get $b) (i32.add (local.get $b) (local.get $len))))
    (local.set $n (global.get $vn))
    (if (i32.or (i32.le_s (local.get $n) (i32.const 0))
          (i32.or (i64.lt_s (local.get $l) (i64.const 1))
                  (i64.gt_s (local.get $l) (i64.extend_i32_s (i32.sub (local.get $len) (local.get $n))))))
      (then
        (global.set $rerr (i32.const 11))
        (return (i32.const 0))))
    ;; the body after the attributes byte
    (global.set $rp (i32.add (i32.add (local.get $b) (local.get $n)) (i32.const 1)))
    (global.set $re (i32.add (i32.add (local.get $b) (local.get $n)) (i32.wrap_i64 (local.get $l))))
    (drop (call $rvarint)) ;; timestamp delta
    (global.set $od (call $rvarint))
    (call $rbytes)
    (global.set $kp (global.get $bp))
    (global.set $kl (global.get $bl))
    (global.set $knull (global.get $bnull))
    (call $rbytes)
    (global.set $vp (global.get $bp))
    (global.set $vl (global.get $bl))
    (global.set $vnull (global.get $bnull))
    (local.set $nh (call $rvarint))
    (if (i32.and (i32.eqz (global.get $rerr))
          (i32.or (i64.lt_s (local.get $nh) (i64.const 0))
                  (i64.gt_s (local.get $nh) (i64.extend_i32_u (i32.sub (global.get $re) (global.get $rp))))))
      (then (global.set $rerr (i32.const 13))))
    (block $done
      (loop $next
        (br_if $done (i32.or (i64.le_s (local.get $nh) (i64.const 0)) (global.get $rerr)))
        (call $rbytes)
        (if (global.get $bnull) (then (global.set $rerr (i32.const 14))))
        (call $rbytes)
        (local.set $nh (i64.sub (local.get $nh) (i64.const 1)))
        (br $next)))
    (if (global.get $rerr) (then (return (i32.const 0))))
    (if (i32.ne (global.get $rp) (global.get $re))
      (then
        (global.set $rerr (i32.const 15))
        (return (i32.const 0))))
    (i32.add (local.get $n) (i32.wrap_i64 (local.get $l))))

  ;; MirrorPidResetRecord{Version int16, SourceClusterId compact string,
  ;; tagged fields}: 0 if well formed, else the fragment saying why. Later
  ;; versions may add fields, so only version 0 is decoded to the end.
  (func $pidReset (param $v i32) (param $len i32) (result i32)
    (local $end i32) (local $l i64) (local $n i32) (local $tags i64) (local $size i64)
    (if (i32.lt_s (local.get $len) (i32.const 2)) (then (return (i32.const 30))))
    (if (i32.lt_s (call $be16s (local.get $v)) (i32.const 0)) (then (return (i32.const 31))))
    (if (i32.gt_s (call $be16s (local.get $v)) (i32.const 0)) (then (return (i32.const 0))))
    (local.set $end (i32.add (local.get $v) (local.get $len)))
    (local.set $v (i32.add (local.get $v) (i32.const 2)))
    (local.set $l (call $uvarint (local.get $v) (local.get $end)))
    (local.set $n (global.get $vn))
    (if (i32.le_s (local.get $n) (i32.const 0)) (then (return (i32.const 32))))
    (if (i64.eqz (local.get $l)) (then (return (i32.const 32))))
    (if (i64.gt_u (i64.sub (local.get $l) (i64.const 1))
                  (i64.extend_i32_u (i32.sub (i32.sub (local.get $end) (local.get $v)) (local.get $n))))
      (then (return (i32.const 32))))
    (local.set $v (i32.add (i32.add (local.get $v) (local.get $n))
                           (i32.wrap_i64 (i64.sub (local.get $l) (i64.const 1)))))
    (local.set $tags (call $uvarint (local.get $v) (local.get $end)))
    (local.set $n (global.get $vn))
    (if (i32.or (i32.le_s (local.get $n) (i32.const 0))
                (i64.gt_u (local.get $tags) (i64.extend_i32_u (i32.sub (local.get $end) (local.get $v)))))
      (then (return (i32.const 33))))
    (local.set $v (i32.add (local.get $v) (local.get $n)))
    (block $done
      (loop $next
        (br_if $done (i64.eqz (local.get $tags)))
        (drop (call $uvarint (local.get $v) (local.get $end)))
        (if (i32.le_s (global.get $vn) (i32.const 0)) (then (return (i32.const 34))))
        (local.set $v (i32.add (local.get $v) (global.get $vn)))
        (local.set $size (call $uvarint (local.get $v) (local.get $end)))
        (local.set $n (global.get $vn))
        (if (i32.le_s (local.get $n) (i32.const 0)) (then (return (i32.const 35))))
        (if (i64.gt_u (local.get $size)
                      (i64.extend_i32_u (i32.sub (i32.sub (local.get $end) (local.get $v)) (local.get $n))))
          (then (return (i32.const 35))))
        (local.set $v (i32.add (i32.add (local.get $v) (local.get $n)) (i32.wrap_i64 (local.get $size))))
        (local.set $tags (i64.sub (local.get $tags) (i64.const 1)))
        (br $next)))
    (if (i32.ne (local.get $v) (local.get $end)) (then (return (i32.const 36))))
    (i32.const 0))

  ;; Judges control batch $i of a mirror topic (table entry $e; input at
  ;; $p with flags $flags), writing a verdict if it is refused.
  (func $check (param $i i32) (param $e i32) (param $p i32) (param $flags i32)
    (local $attrs i32) (local $lod i32) (local $rc i32) (local $bo i32) (local $size i32)
    (local $d i32) (local $dl i32) (local $n i32) (local $used i32) (local $typ i32) (local $why i32)
    (local.set $attrs (i32.or (i32.shl (i32.load8_u offset=21 (local.get $e)) (i32.const 8))
                              (i32.load8_u offset=22 (local.get $e))))
    (if (i32.and (local.get $attrs) (i32.const 0xff80))
      (then
        (call $begin (local.get $i))
        (call $s (i32.const 1))
        (call $hex (i32.and (local.get $attrs) (i32.const 0xff80)))
        (call $s (i32.const 2))
        (call $end)
        (return)))
    (if (i32.and (local.get $attrs) (i32.const 7))
      (then (call $reject (local.get $i) (i32.const 3)) (return)))
    (local.set $lod (call $be32 (i32.add (local.get $e) (i32.const 23))))
    (if (local.get $lod)
      (then
        (call $rejectNum (local.get $i) (i32.const 4)
          (i64.add (i64.extend_i32_s (local.get $lod)) (i64.const 1)) (i32.const 5))
        (return)))
    (local.set $rc (call $be32 (i32.add (local.get $e) (i32.const 57))))
    (if (i32.eqz (local.get $rc)) (then (return))) ;; compaction removed the marker and kept the batch
    (if (i32.ne (local.get $rc) (i32.const 1))
      (then
        (call $rejectNum (local.get $i) (i32.const 6) (i64.extend_i32_s (local.get $rc)) (i32.const 7))
        (return)))
    (local.set $bo (i32.load offset=68 (local.get $e)))
    (if (i32.or (i32.eqz (local.get $bo)) (i32.eqz (i32.and (local.get $flags) (i32.const 3))))
      (then (call $reject (local.get $i) (i32.const 8)) (return)))
    (local.set $size (i32.load offset=64 (local.get $e)))
    (if (i32.lt_u (local.get $size) (i32.const 61))
      (then
        (call $begin (local.get $i))
        (call $s (i32.const 9))
        (call $s (i32.const 10))
        (call $end)
        (return)))
    ;; the records: the first is kept, the others only counted
    (local.set $d (i32.add (i32.add (local.get $p) (local.get $bo)) (i32.const 61)))
    (local.set $dl (i32.sub (local.get $size) (i32.const 61)))
    (block $done
      (loop $next
        (br_if $done (i32.le_s (local.get $dl) (i32.const 0)))
        (if (i32.eqz (local.get $n))
          (then (local.set $used (call $record (local.get $d) (local.get $dl))))
          (else
            ;; keep the first record's fields
            (local.set $used (call $recordKeep (local.get $d) (local.get $dl)))))
        (if (i32.eqz (local.get $used))
          (then
            (call $begin (local.get $i))
            (call $s (i32.const 9))
            (call $s (global.get $rerr))
            (call $end)
            (return)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (local.set $d (i32.add (local.get $d) (local.get $used)))
        (local.set $dl (i32.sub (local.get $dl) (local.get $used)))
        (br $next)))
    (if (i32.ne (local.get $n) (i32.const 1))
      (then
        (call $rejectNum (local.get $i) (i32.const 16) (i64.extend_i32_s (local.get $n)) (i32.const 17))
        (return)))
    (if (i64.ne (global.get $od) (i64.const 0))
      (then
        (call $rejectNum (local.get $i) (i32.const 18) (global.get $od) (i32.const 19))
        (return)))
    (if (i32.or (global.get $knull) (i32.lt_s (global.get $kl) (i32.const 4)))
      (then
        (call $rejectNum (local.get $i) (i32.const 20) (i64.extend_i32_s (global.get $kl)) (i32.const 21))
        (return)))
    (if (i32.lt_s (call $be16s (global.get $kp)) (i32.const 0))
      (then
        (call $rejectNum (local.get $i) (i32.const 22)
          (i64.extend_i32_s (call $be16s (global.get $kp))) (i32.const 23))
        (return)))
    (local.set $typ (call $be16s (i32.add (global.get $kp) (i32.const 2))))
    (if (i32.le_u (local.get $typ) (i32.const 1)) ;; ABORT, COMMIT
      (then
        (if (i32.eqz (i32.and (local.get $attrs) (i32.const 0x10)))
          (then (call $reject (local.get $i) (i32.const 24)) (return)))
        (if (i32.and (i32.load8_u offset=43 (local.get $e)) (i32.const 0x80))
          (then (call $reject (local.get $i) (i32.const 25)) (return)))
        (if (i32.or (global.get $vnull) (i32.lt_s (global.get $vl) (i32.const 6)))
          (then
            (call $rejectNum (local.get $i) (i32.const 26) (i64.extend_i32_s (global.get $vl)) (i32.const 27))
            (return)))
        (if (i32.lt_s (call $be16s (global.get $vp)) (i32.const 0))
          (then (call $reject (local.get $i) (i32.const 28)) (return)))
        (return)))
    (if (i32.eq (local.get $typ) (i32.const 7)) ;; MIRROR_PID_RESET
      (then
        (if (global.get $vnull)
          (then (call $reject (local.get $i) (i32.const 29)) (return)))
        (local.set $why (call $pidReset (global.get $vp) (global.get $vl)))
        (if (local.get $why)
          (then (call $reject (local.get $i) (local.get $why))))
        (return)))
    (if (i32.and (i32.ge_s (local.get $typ) (i32.const 2)) (i32.le_s (local.get $typ) (i32.const 6)))
      (then
        (call $rejectNum (local.get $i) (i32.const 37) (i64.extend_i32_s (local.get $typ)) (i32.const 38))
        (return)))
    (call $rejectNum (local.get $i) (i32.const 39) (i64.extend_i32_s (local.get $typ)) (i32.const -1)))

  ;; $record for the second and later records: the first record's fields
  ;; stay in the globals.
  (func $recordKeep (param $b i32) (param $len i32) (result i32)
    (local $od i64) (local $kp i32) (local $kl i32) (local $knull i32)
    (local $vp i32) (local $vl i32) (local $vnull i32) (local $r i32)
    (local.set $od (global.get $od))
    (local.set $kp (global.get $kp))
    (local.set $kl (global.get $kl))
    (local.set $knull (global.get $knull))
    (local.set $vp (global.get $vp))
    (local.set $vl (global.get $vl))
    (local.set $vnull (global.get $vnull))
    (local.set $r (call $record (local.get $b) (local.get $len)))
    (global.set $od (local.get $od))
    (global.set $kp (local.get $kp))
    (global.set $kl (local.get $kl))
    (global.set $knull (local.get $knull))
    (global.set $vp (local.get $vp))
    (global.set $vl (local.get $vl))
    (global.set $vnull (local.get $vnull))
    (local.get $r))

  (func (export "verbatim_judge") (param $p i32) (param $len i32) (result i64)
    (local $n i32) (local $tab i32) (local $mode i32) (local $flags i32)
    (local $out i32) (local $i i32) (local $e i32)
    (local.set $n (i32.load offset=36 (local.get $p)))
    (local.set $tab (i32.add (local.get $p) (i32.load offset=40 (local.get $p))))
    (local.set $mode (i32.load8_u offset=12 (local.get $p)))
    (local.set $flags (i32.load offset=8 (local.get $p)))
    (local.set $out
      (i32.and (i32.add (i32.add (local.get $p) (local.get $len)) (i32.const 7)) (i32.const -8)))
    (global.set $w (i32.add (local.get $out) (i32.const 4)))
    (global.set $count (i32.const 0))
    (local.set $e (local.get $tab))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (if (i32.and (i32.load8_u offset=61 (local.get $e)) (i32.const 1)) ;; control batch
          (then
            (if (i32.eqz (local.get $mode))
              (then (call $reject (local.get $i) (i32.const 0)))
              (else (call $check (local.get $i) (local.get $e) (local.get $p) (local.get $flags))))))
        (local.set $e (i32.add (local.get $e) (i32.const 80)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (if (i32.eqz (global.get $count))
      (then (return (i64.const 0))))
    (i32.store (local.get $out) (global.get $count))
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $out)) (i64.const 32))
      (i64.extend_i32_u (i32.sub (global.get $w) (local.get $out)))))
)
