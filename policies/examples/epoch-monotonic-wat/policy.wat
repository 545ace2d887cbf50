;; epoch-monotonic-wat: the epoch-monotonic built-in written by hand in
;; WebAssembly text, to show that the policy ABI (docs/policies.md) needs no
;; Go: no runtime, no WASI imports, about 700 bytes compiled.
;;
;; Memory map: 16..  descriptor text, 128.. reason text, 1024.. the input
;; buffer handed out by verbatim_alloc, then the verdict list.
;;
;; Rebuild: wat2wasm policy.wat -o policy.wasm
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "abi=1\nname=epoch-monotonic-wat\nneeds=headers\nconfigs=\n")
  (data (i32.const 128) "leader epoch rewinds below the last one")

  ;; () -> address<<32 | length of the descriptor (54 bytes at 16)
  (func (export "verbatim_describe") (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 54)))

  ;; Room for the input at 1024 and for a verdict list after it (never
  ;; larger than the input: 8+39 bytes per rejected 80-byte batch entry).
  (func (export "verbatim_alloc") (param $n i32) (result i32)
    (local $pages i32)
    (local.set $pages
      (i32.shr_u
        (i32.add (i32.add (i32.shl (local.get $n) (i32.const 1)) (i32.const 2048)) (i32.const 65535))
        (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const -1))
          (then unreachable))))
    (i32.const 1024))

  ;; Big-endian to host order (the batch headers are copied from the wire).
  (func $be32 (param $x i32) (result i32)
    (i32.or
      (i32.or
        (i32.shl (local.get $x) (i32.const 24))
        (i32.and (i32.shl (local.get $x) (i32.const 8)) (i32.const 0xff0000)))
      (i32.or
        (i32.and (i32.shr_u (local.get $x) (i32.const 8)) (i32.const 0xff00))
        (i32.shr_u (local.get $x) (i32.const 24)))))

  (func (export "verbatim_judge") (param $p i32) (param $len i32) (result i64)
    (local $floor i32) (local $n i32) (local $tab i32) (local $i i32)
    (local $e i32) (local $out i32) (local $w i32) (local $count i32)
    (local.set $floor (i32.load offset=32 (local.get $p)))   ;; last stored batch epoch
    (local.set $n (i32.load offset=36 (local.get $p)))       ;; batch count
    (local.set $tab (i32.add (local.get $p) (i32.load offset=40 (local.get $p))))
    (local.set $out
      (i32.and (i32.add (i32.add (local.get $p) (local.get $len)) (i32.const 7)) (i32.const -8)))
    (local.set $w (i32.add (local.get $out) (i32.const 4)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        ;; leader epoch: header bytes 12..16 of the 80-byte entry
        (local.set $e
          (call $be32
            (i32.load offset=12 (i32.add (local.get $tab) (i32.mul (local.get $i) (i32.const 80))))))
        (if (i32.lt_s (local.get $e) (local.get $floor))
          (then
            (i32.store (local.get $w) (local.get $i))
            (i32.store16 offset=4 (local.get $w) (i32.const 44))   ;; POLICY_VIOLATION
            (i32.store16 offset=6 (local.get $w) (i32.const 39))
            (memory.copy (i32.add (local.get $w) (i32.const 8)) (i32.const 128) (i32.const 39))
            (local.set $w (i32.add (local.get $w) (i32.const 47)))
            (local.set $count (i32.add (local.get $count) (i32.const 1))))
          (else
            (local.set $floor (local.get $e))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (if (i32.eqz (local.get $count))
      (then (return (i64.const 0))))
    (i32.store (local.get $out) (local.get $count))
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $out)) (i64.const 32))
      (i64.extend_i32_u (i32.sub (local.get $w) (local.get $out)))))
)
