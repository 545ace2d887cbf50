;; badverdict: a hostile policy module for wasmpolicy's tests (see host tests).
;; Rebuild: wat2wasm badverdict.wat -o badverdict.wasm
(module
  
  (memory (export "memory") 2)
  (data (i32.const 16) "abi=1\nname=badverdict\n")
  (func (export "verbatim_describe") (result i64) (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 22)))
  (func (export "verbatim_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "verbatim_judge") (param i32 i32) (result i64) (i64.const 0x7fff000000000100))
)
