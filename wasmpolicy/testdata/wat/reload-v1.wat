;; reload-v1: version 1 of the module "reload" (accepts everything), for the reload
;; test. Rebuild: wat2wasm reload-v1.wat -o reload-v1.wasm
(module
  (memory (export "memory") 2)
  (data (i32.const 16) "abi=1\nname=reload\n")
  (func (export "verbatim_describe") (result i64) (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 18)))
  (func (export "verbatim_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "verbatim_judge") (param i32 i32) (result i64) (i64.const 0))
)
