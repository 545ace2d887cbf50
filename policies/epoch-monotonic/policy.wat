;; epoch-monotonic: the built-in policy that refuses leader-epoch rewinds
;; (invariant I3), written in WebAssembly text (no runtime, no imports). A
;; batch whose partition leader epoch is lower than the last stored
;; batch's, or than an earlier batch's in the same request, is rejected
;; with POLICY_VIOLATION. The Go version next to it (main.go) is the
;; reference implementation: the tests run both over the same batches and
;; require the same verdicts and reasons.
;;
;; Memory map: 16.. descriptor (NUL-terminated), 128.. and 256.. the reason
;; fragments, 960..1000 digit scratch, 1024.. the input buffer handed out
;; by verbatim_alloc, then the verdict list.
;;
;; Built by policies/build.sh with wabt's wat2wasm.
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "abi=1\0aname=epoch-monotonic\0aneeds=headers\0aconfigs=\0a\00")
  (data (i32.const 128) "leader epoch \00")
  (data (i32.const 256) " rewinds below \00")

  (global $w (mut i32) (i32.const 0)) ;; next byte of the verdict list

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

  ;; The input goes at 1024; the verdict list after it is never larger
  ;; than the input (at most 8+38 bytes per rejected 80-byte batch entry).
  (func (export "verbatim_alloc") (param $n i32) (result i32)
    (local $pages i32)
    (if (i32.gt_u (local.get $n) (i32.const 0x40000000))
      (then unreachable))
    (local.set $pages
      (i32.shr_u
        (i32.add (i32.shl (local.get $n) (i32.const 1)) (i32.const 67583)) ;; 2n + 1024 + 1024 + 65535
        (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const -1))
          (then unreachable))))
    (i32.const 1024))

  ;; Appends the NUL-terminated text at $a.
  (func $s (param $a i32)
    (local $c i32)
    (block $done
      (loop $next
        (local.set $c (i32.load8_u (local.get $a)))
        (br_if $done (i32.eqz (local.get $c)))
        (i32.store8 (global.get $w) (local.get $c))
        (global.set $w (i32.add (global.get $w) (i32.const 1)))
        (local.set $a (i32.add (local.get $a) (i32.const 1)))
        (br $next))))

  ;; Appends $x in decimal.
  (func $dec (param $x i32)
    (local $u i32) (local $p i32)
    (local.set $u (local.get $x))
    (if (i32.lt_s (local.get $x) (i32.const 0))
      (then (local.set $u (i32.sub (i32.const 0) (local.get $x)))))
    (local.set $p (i32.const 1000))
    (loop $next
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $u) (i32.const 10))))
      (local.set $u (i32.div_u (local.get $u) (i32.const 10)))
      (br_if $next (local.get $u)))
    (if (i32.lt_s (local.get $x) (i32.const 0))
      (then
        (local.set $p (i32.sub (local.get $p) (i32.const 1)))
        (i32.store8 (local.get $p) (i32.const 45))))
    (memory.copy (global.get $w) (local.get $p) (i32.sub (i32.const 1000) (local.get $p)))
    (global.set $w (i32.add (global.get $w) (i32.sub (i32.const 1000) (local.get $p)))))

  (func (export "verbatim_judge") (param $p i32) (param $len i32) (result i64)
    (local $floor i32) (local $n i32) (local $e i32) (local $i i32)
    (local $epoch i32) (local $out i32) (local $rs i32) (local $count i32)
    (local.set $floor (i32.load offset=32 (local.get $p)))   ;; last stored batch epoch
    (local.set $n (i32.load offset=36 (local.get $p)))       ;; batch count
    (local.set $e (i32.add (local.get $p) (i32.load offset=40 (local.get $p))))
    (local.set $out
      (i32.and (i32.add (i32.add (local.get $p) (local.get $len)) (i32.const 7)) (i32.const -8)))
    (global.set $w (i32.add (local.get $out) (i32.const 4)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        ;; leader epoch: big-endian header bytes 12..16 of the 80-byte entry
        (local.set $epoch
          (i32.or
            (i32.or (i32.shl (i32.load8_u offset=12 (local.get $e)) (i32.const 24))
                    (i32.shl (i32.load8_u offset=13 (local.get $e)) (i32.const 16)))
            (i32.or (i32.shl (i32.load8_u offset=14 (local.get $e)) (i32.const 8))
                    (i32.load8_u offset=15 (local.get $e)))))
        (if (i32.lt_s (local.get $epoch) (local.get $floor))
          (then
            (i32.store (global.get $w) (local.get $i))
            (i32.store16 offset=4 (global.get $w) (i32.const 44)) ;; POLICY_VIOLATION
            (global.set $w (i32.add (global.get $w) (i32.const 8)))
            (local.set $rs (global.get $w))
            (call $s (i32.const 128))
            (call $dec (local.get $epoch))
            (call $s (i32.const 256))
            (call $dec (local.get $floor))
            (i32.store16 (i32.sub (local.get $rs) (i32.const 2))
                         (i32.sub (global.get $w) (local.get $rs)))
            (local.set $count (i32.add (local.get $count) (i32.const 1))))
          (else
            (local.set $floor (local.get $epoch))))
        (local.set $e (i32.add (local.get $e) (i32.const 80)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (if (i32.eqz (local.get $count))
      (then (return (i64.const 0))))
    (i32.store (local.get $out) (local.get $count))
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $out)) (i64.const 32))
      (i64.extend_i32_u (i32.sub (global.get $w) (local.get $out)))))
)
