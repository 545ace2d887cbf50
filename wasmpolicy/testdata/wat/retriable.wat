;; retriable: a hostile policy module for wasmpolicy's tests (see host tests).
;; Rebuild: wat2wasm retriable.wat -o retriable.wasm
(module
  
  (memory (export "memory") 2)
  (data (i32.const 16) "abi=1\nname=retriable\n")
  (func (export "verbatim_describe") (result i64) (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 21)))
  (func (export "verbatim_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "verbatim_judge") (param $p i32) (param $len i32) (result i64)
    (local $out i32)
    (local.set $out (i32.const 60000))
    (i32.store (local.get $out) (i32.const 1))
    (i32.store offset=4 (local.get $out) (i32.const 0))
    (i32.store16 offset=8 (local.get $out) (i32.const 6))
    (i32.store16 offset=10 (local.get $out) (i32.const 1))
    (i32.store8 offset=12 (local.get $out) (i32.const 120))
    (i64.or (i64.shl (i64.extend_i32_u (local.get $out)) (i64.const 32)) (i64.const 13)))
)
