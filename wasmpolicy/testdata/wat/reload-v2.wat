;; reload-v2: version 2 of the module "reload" (rejects the first batch with reason "v2"), for the reload
;; test. Rebuild: wat2wasm reload-v2.wat -o reload-v2.wasm
(module
  (memory (export "memory") 2)
  (data (i32.const 16) "abi=1\nname=reload\n")
  (func (export "verbatim_describe") (result i64) (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 18)))
  (func (export "verbatim_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "verbatim_judge") (param i32 i32) (result i64)
    (i32.store (i32.const 60000) (i32.const 1))
    (i32.store (i32.const 60004) (i32.const 0))
    (i32.store16 (i32.const 60008) (i32.const 44))
    (i32.store16 (i32.const 60010) (i32.const 2))
    (i32.store16 (i32.const 60012) (i32.const 0x3276))
    (i64.or (i64.shl (i64.const 60000) (i64.const 32)) (i64.const 14)))
)
