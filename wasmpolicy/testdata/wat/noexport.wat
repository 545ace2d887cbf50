;; noexport: a hostile policy module for wasmpolicy's tests (see host tests).
;; Rebuild: wat2wasm noexport.wat -o noexport.wasm
(module
  
  (memory (export "memory") 2)
  (data (i32.const 16) "abi=1\nname=noexport\n")
  (func (export "verbatim_describe") (result i64) (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 20)))
  (func (export "verbatim_alloc") (param i32) (result i32) (i32.const 1024))
  
)
