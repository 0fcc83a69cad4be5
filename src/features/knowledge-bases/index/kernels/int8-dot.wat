;; Int8 dot products for the knowledge-base vector scan, with WebAssembly SIMD (16 lanes), and the
;; 1-bit sign codes of the compact first pass over large sets (vector-codes.ts).
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
        (br $rows))))

  ;; Like dot_all, for the rows named by a list of slots: list[i] (an i32 slot) is replaced in place
  ;; by the int32 dot product of row data + slot * stride with the query.
  (func (export "dot_list")
    (param $data i32) (param $stride i32) (param $query i32) (param $list i32) (param $n i32)
    (local $row i32) (local $end i32) (local $endk i32) (local $j i32) (local $acc v128) (local $a v128) (local $b v128)
    (local $r0 i32) (local $r1 i32) (local $r2 i32) (local $r3 i32) (local $r4 i32) (local $r5 i32) (local $r6 i32) (local $r7 i32)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128) (local $s4 v128) (local $s5 v128) (local $s6 v128) (local $s7 v128) (local $ql v128) (local $qh v128)
    (local.set $end (i32.add (local.get $list) (i32.shl (local.get $n) (i32.const 2))))
    ;; 8 rows at a time: the slots are scattered over the arena, so each row's first loads miss
    ;; the caches; reading 8 rows in one loop lets those misses overlap instead of queueing
    ;; one row behind the other (the products are the same integers either way).
    (local.set $endk (i32.add (local.get $list) (i32.shl (i32.and (local.get $n) (i32.const -8)) (i32.const 2))))
    (block $group_done
      (loop $groups
        (br_if $group_done (i32.ge_u (local.get $list) (local.get $endk)))
        (local.set $r0 (i32.add (local.get $data) (i32.mul (i32.load (local.get $list)) (local.get $stride))))
        (local.set $r1 (i32.add (local.get $data) (i32.mul (i32.load offset=4 (local.get $list)) (local.get $stride))))
        (local.set $r2 (i32.add (local.get $data) (i32.mul (i32.load offset=8 (local.get $list)) (local.get $stride))))
        (local.set $r3 (i32.add (local.get $data) (i32.mul (i32.load offset=12 (local.get $list)) (local.get $stride))))
        (local.set $r4 (i32.add (local.get $data) (i32.mul (i32.load offset=16 (local.get $list)) (local.get $stride))))
        (local.set $r5 (i32.add (local.get $data) (i32.mul (i32.load offset=20 (local.get $list)) (local.get $stride))))
        (local.set $r6 (i32.add (local.get $data) (i32.mul (i32.load offset=24 (local.get $list)) (local.get $stride))))
        (local.set $r7 (i32.add (local.get $data) (i32.mul (i32.load offset=28 (local.get $list)) (local.get $stride))))
        (local.set $s0 (v128.const i32x4 0 0 0 0))
        (local.set $s1 (v128.const i32x4 0 0 0 0))
        (local.set $s2 (v128.const i32x4 0 0 0 0))
        (local.set $s3 (v128.const i32x4 0 0 0 0))
        (local.set $s4 (v128.const i32x4 0 0 0 0))
        (local.set $s5 (v128.const i32x4 0 0 0 0))
        (local.set $s6 (v128.const i32x4 0 0 0 0))
        (local.set $s7 (v128.const i32x4 0 0 0 0))
        (local.set $j (i32.const 0))
        (loop $cols_k
          (local.set $b (v128.load (i32.add (local.get $query) (local.get $j))))
          (local.set $ql (i16x8.extend_low_i8x16_s (local.get $b)))
          (local.set $qh (i16x8.extend_high_i8x16_s (local.get $b)))
          (local.set $a (v128.load (i32.add (local.get $r0) (local.get $j))))
          (local.set $s0 (i32x4.add (local.get $s0) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s0 (i32x4.add (local.get $s0) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load (i32.add (local.get $r1) (local.get $j))))
          (local.set $s1 (i32x4.add (local.get $s1) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s1 (i32x4.add (local.get $s1) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load (i32.add (local.get $r2) (local.get $j))))
          (local.set $s2 (i32x4.add (local.get $s2) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s2 (i32x4.add (local.get $s2) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load (i32.add (local.get $r3) (local.get $j))))
          (local.set $s3 (i32x4.add (local.get $s3) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s3 (i32x4.add (local.get $s3) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load (i32.add (local.get $r4) (local.get $j))))
          (local.set $s4 (i32x4.add (local.get $s4) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s4 (i32x4.add (local.get $s4) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load (i32.add (local.get $r5) (local.get $j))))
          (local.set $s5 (i32x4.add (local.get $s5) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s5 (i32x4.add (local.get $s5) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load (i32.add (local.get $r6) (local.get $j))))
          (local.set $s6 (i32x4.add (local.get $s6) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s6 (i32x4.add (local.get $s6) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load (i32.add (local.get $r7) (local.get $j))))
          (local.set $s7 (i32x4.add (local.get $s7) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s7 (i32x4.add (local.get $s7) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $b (v128.load offset=16 (i32.add (local.get $query) (local.get $j))))
          (local.set $ql (i16x8.extend_low_i8x16_s (local.get $b)))
          (local.set $qh (i16x8.extend_high_i8x16_s (local.get $b)))
          (local.set $a (v128.load offset=16 (i32.add (local.get $r0) (local.get $j))))
          (local.set $s0 (i32x4.add (local.get $s0) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s0 (i32x4.add (local.get $s0) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load offset=16 (i32.add (local.get $r1) (local.get $j))))
          (local.set $s1 (i32x4.add (local.get $s1) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s1 (i32x4.add (local.get $s1) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load offset=16 (i32.add (local.get $r2) (local.get $j))))
          (local.set $s2 (i32x4.add (local.get $s2) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s2 (i32x4.add (local.get $s2) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load offset=16 (i32.add (local.get $r3) (local.get $j))))
          (local.set $s3 (i32x4.add (local.get $s3) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s3 (i32x4.add (local.get $s3) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load offset=16 (i32.add (local.get $r4) (local.get $j))))
          (local.set $s4 (i32x4.add (local.get $s4) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s4 (i32x4.add (local.get $s4) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load offset=16 (i32.add (local.get $r5) (local.get $j))))
          (local.set $s5 (i32x4.add (local.get $s5) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s5 (i32x4.add (local.get $s5) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load offset=16 (i32.add (local.get $r6) (local.get $j))))
          (local.set $s6 (i32x4.add (local.get $s6) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s6 (i32x4.add (local.get $s6) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $a (v128.load offset=16 (i32.add (local.get $r7) (local.get $j))))
          (local.set $s7 (i32x4.add (local.get $s7) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (local.get $ql))))
          (local.set $s7 (i32x4.add (local.get $s7) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (local.get $qh))))
          (local.set $j (i32.add (local.get $j) (i32.const 32)))
          (br_if $cols_k (i32.lt_u (local.get $j) (local.get $stride))))
        (i32.store offset=0 (local.get $list)
          (i32.add (i32.add (i32x4.extract_lane 0 (local.get $s0)) (i32x4.extract_lane 1 (local.get $s0)))
                   (i32.add (i32x4.extract_lane 2 (local.get $s0)) (i32x4.extract_lane 3 (local.get $s0)))))
        (i32.store offset=4 (local.get $list)
          (i32.add (i32.add (i32x4.extract_lane 0 (local.get $s1)) (i32x4.extract_lane 1 (local.get $s1)))
                   (i32.add (i32x4.extract_lane 2 (local.get $s1)) (i32x4.extract_lane 3 (local.get $s1)))))
        (i32.store offset=8 (local.get $list)
          (i32.add (i32.add (i32x4.extract_lane 0 (local.get $s2)) (i32x4.extract_lane 1 (local.get $s2)))
                   (i32.add (i32x4.extract_lane 2 (local.get $s2)) (i32x4.extract_lane 3 (local.get $s2)))))
        (i32.store offset=12 (local.get $list)
          (i32.add (i32.add (i32x4.extract_lane 0 (local.get $s3)) (i32x4.extract_lane 1 (local.get $s3)))
                   (i32.add (i32x4.extract_lane 2 (local.get $s3)) (i32x4.extract_lane 3 (local.get $s3)))))
        (i32.store offset=16 (local.get $list)
          (i32.add (i32.add (i32x4.extract_lane 0 (local.get $s4)) (i32x4.extract_lane 1 (local.get $s4)))
                   (i32.add (i32x4.extract_lane 2 (local.get $s4)) (i32x4.extract_lane 3 (local.get $s4)))))
        (i32.store offset=20 (local.get $list)
          (i32.add (i32.add (i32x4.extract_lane 0 (local.get $s5)) (i32x4.extract_lane 1 (local.get $s5)))
                   (i32.add (i32x4.extract_lane 2 (local.get $s5)) (i32x4.extract_lane 3 (local.get $s5)))))
        (i32.store offset=24 (local.get $list)
          (i32.add (i32.add (i32x4.extract_lane 0 (local.get $s6)) (i32x4.extract_lane 1 (local.get $s6)))
                   (i32.add (i32x4.extract_lane 2 (local.get $s6)) (i32x4.extract_lane 3 (local.get $s6)))))
        (i32.store offset=28 (local.get $list)
          (i32.add (i32.add (i32x4.extract_lane 0 (local.get $s7)) (i32x4.extract_lane 1 (local.get $s7)))
                   (i32.add (i32x4.extract_lane 2 (local.get $s7)) (i32x4.extract_lane 3 (local.get $s7)))))
        (local.set $list (i32.add (local.get $list) (i32.const 32)))
        (br $groups)))
    ;; The last n % 8 rows, one at a time.
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $list) (local.get $end)))
        (local.set $row (i32.add (local.get $data) (i32.mul (i32.load (local.get $list)) (local.get $stride))))
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
        (i32.store (local.get $list)
          (i32.add
            (i32.add (i32x4.extract_lane 0 (local.get $acc)) (i32x4.extract_lane 1 (local.get $acc)))
            (i32.add (i32x4.extract_lane 2 (local.get $acc)) (i32x4.extract_lane 3 (local.get $acc)))))
        (local.set $list (i32.add (local.get $list) (i32.const 4)))
        (br $rows))))

  ;; Sign codes of `n` rows (stride bytes each, a multiple of 32) from slot $first on. Codes are
  ;; stored in blocks of 16 vectors, transposed: byte b of the code of slot s (bits: dims 8b to
  ;; 8b+7, 1 = negative) is at codes + (s / 16) * code_bytes * 16 + b * 16 + s % 16, so the scan
  ;; reads byte b of 16 vectors in one load. stats gets three i32 a row: the sum of squares, the
  ;; sum of absolute values and the number of negative values.
  (func (export "encode")
    (param $rows i32) (param $n i32) (param $stride i32) (param $codes i32) (param $first i32) (param $code_bytes i32) (param $stats i32)
    (local $row i32) (local $end i32) (local $j i32) (local $sq v128) (local $ab v128) (local $a v128)
    (local $base i32) (local $bits i32) (local $neg i32)
    (local.set $row (local.get $rows))
    (local.set $end (i32.add (local.get $rows) (i32.mul (local.get $n) (local.get $stride))))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $row) (local.get $end)))
        (local.set $base (i32.add (local.get $codes)
          (i32.add (i32.mul (i32.shr_u (local.get $first) (i32.const 4)) (i32.shl (local.get $code_bytes) (i32.const 4)))
                   (i32.and (local.get $first) (i32.const 15)))))
        (local.set $sq (v128.const i32x4 0 0 0 0))
        (local.set $ab (v128.const i32x4 0 0 0 0))
        (local.set $neg (i32.const 0))
        (local.set $j (i32.const 0))
        (loop $cols
          (local.set $a (v128.load (i32.add (local.get $row) (local.get $j))))
          (local.set $bits (i8x16.bitmask (local.get $a)))
          (local.set $neg (i32.add (local.get $neg) (i32.popcnt (local.get $bits))))
          ;; 16 values make code bytes j / 8 and j / 8 + 1, 16 bytes apart in the block.
          (i32.store8 (i32.add (local.get $base) (i32.shl (local.get $j) (i32.const 1))) (local.get $bits))
          (i32.store8 offset=16 (i32.add (local.get $base) (i32.shl (local.get $j) (i32.const 1))) (i32.shr_u (local.get $bits) (i32.const 8)))
          (local.set $sq (i32x4.add (local.get $sq) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (i16x8.extend_low_i8x16_s (local.get $a)))))
          (local.set $sq (i32x4.add (local.get $sq) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (i16x8.extend_high_i8x16_s (local.get $a)))))
          (local.set $ab (i32x4.add (local.get $ab) (i32x4.extadd_pairwise_i16x8_u (i16x8.extadd_pairwise_i8x16_u (i8x16.abs (local.get $a))))))
          (local.set $j (i32.add (local.get $j) (i32.const 16)))
          (br_if $cols (i32.lt_u (local.get $j) (local.get $stride))))
        (i32.store (local.get $stats)
          (i32.add
            (i32.add (i32x4.extract_lane 0 (local.get $sq)) (i32x4.extract_lane 1 (local.get $sq)))
            (i32.add (i32x4.extract_lane 2 (local.get $sq)) (i32x4.extract_lane 3 (local.get $sq)))))
        (i32.store offset=4 (local.get $stats)
          (i32.add
            (i32.add (i32x4.extract_lane 0 (local.get $ab)) (i32x4.extract_lane 1 (local.get $ab)))
            (i32.add (i32x4.extract_lane 2 (local.get $ab)) (i32x4.extract_lane 3 (local.get $ab)))))
        (i32.store offset=8 (local.get $stats) (local.get $neg))
        (local.set $stats (i32.add (local.get $stats) (i32.const 12)))
        (local.set $first (i32.add (local.get $first) (i32.const 1)))
        (local.set $row (i32.add (local.get $row) (local.get $stride)))
        (br $each))))

  ;; The compact pass over `blocks` blocks of 16 codes (code_bytes even): for each vector, A = the
  ;; sum of the query's 4-bit values u_j over the dimensions where the vector is negative, by
  ;; table look-up: the table for a nibble position (4 dimensions) holds, for each of the 16 sign
  ;; patterns, the sum of u over its set bits (<= 60), at luts + position * 16, two positions a
  ;; code byte (low nibble first). Four look-ups fit a byte (<= 240); sums are kept in u16 lanes.
  ;; out gets A as u16, slot by slot.
  (func (export "fastscan")
    (param $codes i32) (param $blocks i32) (param $code_bytes i32) (param $luts i32) (param $out i32)
    (local $end i32) (local $b i32) (local $lut i32) (local $x v128) (local $s v128) (local $lo v128) (local $hi v128)
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $blocks) (i32.const 5))))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (local.set $lo (v128.const i32x4 0 0 0 0))
        (local.set $hi (v128.const i32x4 0 0 0 0))
        (local.set $b (i32.const 0))
        (local.set $lut (local.get $luts))
        (loop $bytes
          (local.set $x (v128.load (local.get $codes)))
          (local.set $s (i8x16.add
            (i8x16.swizzle (v128.load (local.get $lut)) (v128.and (local.get $x) (v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15)))
            (i8x16.swizzle (v128.load offset=16 (local.get $lut)) (v128.and (i16x8.shr_u (local.get $x) (i32.const 4)) (v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15)))))
          (local.set $x (v128.load offset=16 (local.get $codes)))
          (local.set $s (i8x16.add (local.get $s) (i8x16.add
            (i8x16.swizzle (v128.load offset=32 (local.get $lut)) (v128.and (local.get $x) (v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15)))
            (i8x16.swizzle (v128.load offset=48 (local.get $lut)) (v128.and (i16x8.shr_u (local.get $x) (i32.const 4)) (v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15))))))
          (local.set $lo (i16x8.add (local.get $lo) (i16x8.extend_low_i8x16_u (local.get $s))))
          (local.set $hi (i16x8.add (local.get $hi) (i16x8.extend_high_i8x16_u (local.get $s))))
          (local.set $codes (i32.add (local.get $codes) (i32.const 32)))
          (local.set $lut (i32.add (local.get $lut) (i32.const 64)))
          (local.set $b (i32.add (local.get $b) (i32.const 2)))
          (br_if $bytes (i32.lt_u (local.get $b) (local.get $code_bytes))))
        (v128.store (local.get $out) (local.get $lo))
        (v128.store offset=16 (local.get $out) (local.get $hi))
        (local.set $out (i32.add (local.get $out) (i32.const 32)))
        (br $each))))

  ;; The estimates from fastscan's sums, 4 vectors a step (n a multiple of 4): out[i] =
  ;; (k + l * negatives[i] + m * sums[i]) * factors[i], all f32 (vector-codes.ts, estimate).
  (func (export "finish")
    (param $sums i32) (param $negatives i32) (param $factors i32) (param $out i32) (param $n i32)
    (param $k f32) (param $l f32) (param $m f32)
    (local $end i32) (local $vk v128) (local $vl v128) (local $vm v128)
    (local.set $vk (f32x4.splat (local.get $k)))
    (local.set $vl (f32x4.splat (local.get $l)))
    (local.set $vm (f32x4.splat (local.get $m)))
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $n) (i32.const 2))))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (v128.store (local.get $out)
          (f32x4.mul
            (f32x4.add
              (f32x4.add (local.get $vk) (f32x4.mul (local.get $vl) (v128.load (local.get $negatives))))
              (f32x4.mul (local.get $vm) (f32x4.convert_i32x4_u (v128.load16x4_u (local.get $sums)))))
            (v128.load (local.get $factors))))
        (local.set $sums (i32.add (local.get $sums) (i32.const 8)))
        (local.set $negatives (i32.add (local.get $negatives) (i32.const 16)))
        (local.set $factors (i32.add (local.get $factors) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $each))))

  ;; How many of the n f32 estimates at est are at least t (bestSlots' threshold), four at a time.
  (func (export "count_at_least") (param $est i32) (param $n i32) (param $t f32) (result i32)
    (local $end i32) (local $end4 i32) (local $acc v128) (local $tv v128) (local $count i32)
    (local.set $end (i32.add (local.get $est) (i32.shl (local.get $n) (i32.const 2))))
    (local.set $end4 (i32.add (local.get $est) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
    (local.set $tv (f32x4.splat (local.get $t)))
    (block $quads_done
      (loop $quads
        (br_if $quads_done (i32.ge_u (local.get $est) (local.get $end4)))
        ;; A lane at or above t is all ones (-1): subtracting counts it.
        (local.set $acc (i32x4.sub (local.get $acc) (f32x4.ge (v128.load (local.get $est)) (local.get $tv))))
        (local.set $est (i32.add (local.get $est) (i32.const 16)))
        (br $quads)))
    (local.set $count
      (i32.add
        (i32.add (i32x4.extract_lane 0 (local.get $acc)) (i32x4.extract_lane 1 (local.get $acc)))
        (i32.add (i32x4.extract_lane 2 (local.get $acc)) (i32x4.extract_lane 3 (local.get $acc)))))
    (block $done
      (loop $rest
        (br_if $done (i32.ge_u (local.get $est) (local.get $end)))
        (if (f32.ge (f32.load (local.get $est)) (local.get $t))
          (then (local.set $count (i32.add (local.get $count) (i32.const 1)))))
        (local.set $est (i32.add (local.get $est) (i32.const 4)))
        (br $rest)))
    (local.get $count))

  ;; Replaces the n f32 estimates at est, in place, by the i32 indexes of those at least t, in
  ;; order (index k is written over estimate k <= i, already read); answers how many.
  (func (export "compact_at_least") (param $est i32) (param $n i32) (param $t f32) (result i32)
    (local $i i32) (local $k i32)
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (if (f32.ge (f32.load (i32.add (local.get $est) (i32.shl (local.get $i) (i32.const 2)))) (local.get $t))
          (then
            (i32.store (i32.add (local.get $est) (i32.shl (local.get $k) (i32.const 2))) (local.get $i))
            (local.set $k (i32.add (local.get $k) (i32.const 1)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (local.get $k))
)
