;; Int8 dot products for the knowledge-base vector scan, with WebAssembly SIMD (16 lanes).
;; Compiled to int8-dot.wasm at build time by scripts/build-vector-kernel.mjs (binaryen).
;; Memory layout is chosen by the host (src/features/knowledge-bases/vector-arena.ts).
(module
  (memory (export "memory") 1)

  ;; out[i] = sum over j < stride of data[i * stride + j] * query[j], as int32, for i < count.
  ;; `stride` is a multiple of 32 (vectors are zero-padded), so each step takes two 16-byte lanes.
  (func (export "dot_all")
    (param $data i32) (param $count i32) (param $stride i32) (param $query i32) (param $out i32)
    (local $row i32) (local $end i32) (local $j i32) (local $acc v128) (local $a v128) (local $b v128)
    (local.set $row (local.get $data))
    (local.set $end (i32.add (local.get $data) (i32.mul (local.get $count) (local.get $stride))))
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $row) (local.get $end)))
        (local.set $acc (v128.const i32x4 0 0 0 0))
        (local.set $j (i32.const 0))
        (loop $cols
          (local.set $a (v128.load (i32.add (local.get $row) (local.get $j))))
          (local.set $b (v128.load (i32.add (local.get $query) (local.get $j))))
          (local.set $acc (i32x4.add (local.get $acc) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (i16x8.extend_low_i8x16_s (local.get $b)))))
          (local.set $acc (i32x4.add (local.get $acc) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (i16x8.extend_high_i8x16_s (local.get $b)))))
          (local.set $a (v128.load offset=16 (i32.add (local.get $row) (local.get $j))))
          (local.set $b (v128.load offset=16 (i32.add (local.get $query) (local.get $j))))
          (local.set $acc (i32x4.add (local.get $acc) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (i16x8.extend_low_i8x16_s (local.get $b)))))
          (local.set $acc (i32x4.add (local.get $acc) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (i16x8.extend_high_i8x16_s (local.get $b)))))
          (local.set $j (i32.add (local.get $j) (i32.const 32)))
          (br_if $cols (i32.lt_u (local.get $j) (local.get $stride))))
        (i32.store (local.get $out)
          (i32.add
            (i32.add (i32x4.extract_lane 0 (local.get $acc)) (i32x4.extract_lane 1 (local.get $acc)))
            (i32.add (i32x4.extract_lane 2 (local.get $acc)) (i32x4.extract_lane 3 (local.get $acc)))))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (local.set $row (i32.add (local.get $row) (local.get $stride)))
        (br $rows)))))
