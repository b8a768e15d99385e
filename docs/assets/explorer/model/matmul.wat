;; The explorer's matrix product x @ W.T over quantized weights, in WebAssembly with 128-bit
;; SIMD (four float32 numbers at a time): smollm2.js's `matmul`, the same sums in float32.
;;
;; Assembled into matmul.wasm by sitebuild/build_wasm.py (the bytes are committed; a test
;; assembles this file again and compares). Loaded by kernel.js; without WebAssembly SIMD
;; the explorer uses smollm2.js's JavaScript product instead.
;;
;; Memory (the page's worker makes it and passes it in):
;;   the float16 table: 65,536 float32 numbers, the value of every half-precision bit pattern
;;     (the blocks store their scales as float16; a table look-up converts them exactly)
;;   two rows of dequantized weights, float32, interleaved four weights at a time
;;   x (T, nIn) and y (T, nOut), float32, row after row, and a copy of x in groups of four
;;     tokens, interleaved four numbers at a time
;;   the model file, whose weight matrices are read where they lie
;;
;; A weight row is dequantized once into float32, as gguf.quants.dequantize gives it:
;;   Q4_1 (20 bytes per 32 weights): float16 scale d, float16 minimum m, 16 bytes of nibbles;
;;     weight j < 16 is d * (byte j & 15) + m, weight 16 + j is d * (byte j >> 4) + m
;;     (the product is exact in float32, the sum rounded once, as in JavaScript);
;;   Q8_0 (34 bytes per 32 weights): float16 scale d, 32 signed bytes; weight j is d * byte j.
;; Then two rows serve four tokens at a time: eight running sums of four lanes each, added
;; up lane by lane at the end ((lane 0 + lane 1) + (lane 2 + lane 3)). The interleaved
;; copies let the innermost loop read the two rows' and the four tokens' numbers at fixed
;; offsets from two addresses. Each output is one token's sum whatever the grouping.
(module
  (import "env" "memory" (memory 1))

  ;; Dequantize one Q4_1 row of n weights (n a multiple of 32) from byte src to float32 at dst,
  ;; four weights every 32 bytes (the other row of the pair goes in between).
  (func $row_q4_1 (param $src i32) (param $n i32) (param $dst i32) (param $tab i32)
    (local $end i32) (local $d v128) (local $m v128) (local $q v128) (local $half v128)
    (local.set $end (i32.add (local.get $dst) (i32.shl (local.get $n) (i32.const 3))))
    (block $done
      (loop $block
        (br_if $done (i32.ge_u (local.get $dst) (local.get $end)))
        (local.set $d (v128.load32_splat
          (i32.add (local.get $tab) (i32.shl (i32.load16_u (local.get $src)) (i32.const 2)))))
        (local.set $m (v128.load32_splat
          (i32.add (local.get $tab) (i32.shl (i32.load16_u offset=2 (local.get $src)) (i32.const 2)))))
        (local.set $q (v128.load offset=4 align=1 (local.get $src)))
        ;; low nibbles: weights 0-15
        (local.set $half (i16x8.extend_low_i8x16_u
          (v128.and (local.get $q) (v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15))))
        (v128.store offset=0 align=4 (local.get $dst) (f32x4.add (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $half)))) (local.get $m)))
        (v128.store offset=32 align=4 (local.get $dst) (f32x4.add (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $half)))) (local.get $m)))
        (local.set $half (i16x8.extend_high_i8x16_u
          (v128.and (local.get $q) (v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15))))
        (v128.store offset=64 align=4 (local.get $dst) (f32x4.add (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $half)))) (local.get $m)))
        (v128.store offset=96 align=4 (local.get $dst) (f32x4.add (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $half)))) (local.get $m)))
        ;; high nibbles: weights 16-31
        (local.set $q (i8x16.shr_u (local.get $q) (i32.const 4)))
        (local.set $half (i16x8.extend_low_i8x16_u (local.get $q)))
        (v128.store offset=128 align=4 (local.get $dst) (f32x4.add (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $half)))) (local.get $m)))
        (v128.store offset=160 align=4 (local.get $dst) (f32x4.add (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $half)))) (local.get $m)))
        (local.set $half (i16x8.extend_high_i8x16_u (local.get $q)))
        (v128.store offset=192 align=4 (local.get $dst) (f32x4.add (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $half)))) (local.get $m)))
        (v128.store offset=224 align=4 (local.get $dst) (f32x4.add (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $half)))) (local.get $m)))
        (local.set $src (i32.add (local.get $src) (i32.const 20)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 256)))
        (br $block))))

  ;; Dequantize one Q8_0 row of n weights (n a multiple of 32) from byte src to float32 at dst,
  ;; four weights every 32 bytes.
  (func $row_q8_0 (param $src i32) (param $n i32) (param $dst i32) (param $tab i32)
    (local $end i32) (local $d v128) (local $q v128) (local $half v128)
    (local.set $end (i32.add (local.get $dst) (i32.shl (local.get $n) (i32.const 3))))
    (block $done
      (loop $block
        (br_if $done (i32.ge_u (local.get $dst) (local.get $end)))
        (local.set $d (v128.load32_splat
          (i32.add (local.get $tab) (i32.shl (i32.load16_u (local.get $src)) (i32.const 2)))))
        ;; weights 0-15
        (local.set $q (v128.load offset=2 align=1 (local.get $src)))
        (local.set $half (i16x8.extend_low_i8x16_s (local.get $q)))
        (v128.store offset=0 align=4 (local.get $dst) (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $half)))))
        (v128.store offset=32 align=4 (local.get $dst) (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $half)))))
        (local.set $half (i16x8.extend_high_i8x16_s (local.get $q)))
        (v128.store offset=64 align=4 (local.get $dst) (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $half)))))
        (v128.store offset=96 align=4 (local.get $dst) (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $half)))))
        ;; weights 16-31
        (local.set $q (v128.load offset=18 align=1 (local.get $src)))
        (local.set $half (i16x8.extend_low_i8x16_s (local.get $q)))
        (v128.store offset=128 align=4 (local.get $dst) (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $half)))))
        (v128.store offset=160 align=4 (local.get $dst) (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $half)))))
        (local.set $half (i16x8.extend_high_i8x16_s (local.get $q)))
        (v128.store offset=192 align=4 (local.get $dst) (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $half)))))
        (v128.store offset=224 align=4 (local.get $dst) (f32x4.mul (local.get $d)
          (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $half)))))
        (local.set $src (i32.add (local.get $src) (i32.const 34)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 256)))
        (br $block))))

  ;; The four lanes of a running sum, added: (lane 0 + lane 1) + (lane 2 + lane 3).
  (func $pack (param $x i32) (param $T i32) (param $nIn i32) (param $dst i32)
    (local $len i32) (local $src i32) (local $end i32) (local $groupEnd i32)
    (local.set $len (i32.shl (local.get $nIn) (i32.const 2)))
    (local.set $groupEnd (i32.add (local.get $x)
      (i32.mul (i32.and (local.get $T) (i32.const -4)) (local.get $len))))
    (block $done
      (loop $group
        (br_if $done (i32.ge_u (local.get $x) (local.get $groupEnd)))
        (local.set $src (local.get $x))
        (local.set $end (i32.add (local.get $x) (local.get $len)))
        (loop $chunk
          (v128.store offset=0 (local.get $dst) (v128.load (local.get $src)))
          (v128.store offset=16 (local.get $dst) (v128.load (i32.add (local.get $src) (local.get $len))))
          (v128.store offset=32 (local.get $dst)
            (v128.load (i32.add (local.get $src) (i32.shl (local.get $len) (i32.const 1)))))
          (v128.store offset=48 (local.get $dst)
            (v128.load (i32.add (local.get $src) (i32.mul (local.get $len) (i32.const 3)))))
          (local.set $dst (i32.add (local.get $dst) (i32.const 64)))
          (local.set $src (i32.add (local.get $src) (i32.const 16)))
          (br_if $chunk (i32.lt_u (local.get $src) (local.get $end))))
        (local.set $x (i32.add (local.get $x) (i32.shl (local.get $len) (i32.const 2))))
        (br $group))))

  ;; The four lanes of a running sum, added: (lane 0 + lane 1) + (lane 2 + lane 3).
  (func $sum (param $v v128) (result f32)
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 1 (local.get $v)))
      (f32.add (f32x4.extract_lane 2 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

  ;; y[t, o] = sum over i of x[t, i] * W[o, i], for outputs o0 <= o < o1 (o1 - o0 even) and
  ;; tokens 0 <= t < T. kind: 0 for Q4_1 weights, 1 for Q8_0. w: the byte where W's first row
  ;; starts; x: (T, nIn) float32 at byte x; y: (T, nOut) float32 at byte y; rows: room for
  ;; two dequantized rows (8 * nIn bytes); packed: room for x (4 * T * nIn bytes);
  ;; tab: the float16 table.
  (func (export "matmul") (param $kind i32) (param $w i32) (param $nIn i32) (param $nOut i32)
        (param $o0 i32) (param $o1 i32) (param $x i32) (param $T i32) (param $y i32)
        (param $rows i32) (param $packed i32) (param $tab i32)
    (local $rowBytes i32) (local $o i32) (local $t i32) (local $len i32) (local $end i32)
    (local $p i32) (local $q i32) (local $at i32) (local $step i32)
    (local $u v128) (local $v v128) (local $e v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)
    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128)
    (local.set $len (i32.shl (local.get $nIn) (i32.const 2))) ;; bytes of one float32 row
    (local.set $rowBytes (i32.mul (i32.shr_u (local.get $nIn) (i32.const 5))
                                  (select (i32.const 20) (i32.const 34) (i32.eqz (local.get $kind)))))
    (local.set $end (i32.add (local.get $rows) (i32.shl (local.get $len) (i32.const 1))))
    (local.set $step (i32.shl (local.get $nOut) (i32.const 2))) ;; bytes from y[t, o] to y[t + 1, o]
    (call $pack (local.get $x) (local.get $T) (local.get $nIn) (local.get $packed))
    (local.set $o (local.get $o0))
    (block $outputs_done
      (loop $outputs
        (br_if $outputs_done (i32.ge_u (local.get $o) (local.get $o1)))
        ;; rows o and o + 1, interleaved four weights at a time
        (if (i32.eqz (local.get $kind))
          (then
            (call $row_q4_1 (i32.add (local.get $w) (i32.mul (local.get $o) (local.get $rowBytes)))
                            (local.get $nIn) (local.get $rows) (local.get $tab))
            (call $row_q4_1 (i32.add (local.get $w) (i32.mul (i32.add (local.get $o) (i32.const 1))
                                                            (local.get $rowBytes)))
                            (local.get $nIn) (i32.add (local.get $rows) (i32.const 16)) (local.get $tab)))
          (else
            (call $row_q8_0 (i32.add (local.get $w) (i32.mul (local.get $o) (local.get $rowBytes)))
                            (local.get $nIn) (local.get $rows) (local.get $tab))
            (call $row_q8_0 (i32.add (local.get $w) (i32.mul (i32.add (local.get $o) (i32.const 1))
                                                            (local.get $rowBytes)))
                            (local.get $nIn) (i32.add (local.get $rows) (i32.const 16)) (local.get $tab))))
        ;; four tokens at a time, from the packed copy
        (local.set $t (i32.const 0))
        (local.set $q (local.get $packed))
        (block $fours_done
          (loop $fours
            (br_if $fours_done (i32.gt_u (i32.add (local.get $t) (i32.const 4)) (local.get $T)))
            (local.set $s0 (v128.const i32x4 0 0 0 0)) (local.set $s1 (v128.const i32x4 0 0 0 0))
            (local.set $s2 (v128.const i32x4 0 0 0 0)) (local.set $s3 (v128.const i32x4 0 0 0 0))
            (local.set $r0 (v128.const i32x4 0 0 0 0)) (local.set $r1 (v128.const i32x4 0 0 0 0))
            (local.set $r2 (v128.const i32x4 0 0 0 0)) (local.set $r3 (v128.const i32x4 0 0 0 0))
            (local.set $p (local.get $rows))
            (loop $inner
              (local.set $u (v128.load offset=0 (local.get $p)))
              (local.set $v (v128.load offset=16 (local.get $p)))
              (local.set $e (v128.load offset=0 (local.get $q)))
              (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $e) (local.get $u))))
              (local.set $r0 (f32x4.add (local.get $r0) (f32x4.mul (local.get $e) (local.get $v))))
              (local.set $e (v128.load offset=16 (local.get $q)))
              (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (local.get $e) (local.get $u))))
              (local.set $r1 (f32x4.add (local.get $r1) (f32x4.mul (local.get $e) (local.get $v))))
              (local.set $e (v128.load offset=32 (local.get $q)))
              (local.set $s2 (f32x4.add (local.get $s2) (f32x4.mul (local.get $e) (local.get $u))))
              (local.set $r2 (f32x4.add (local.get $r2) (f32x4.mul (local.get $e) (local.get $v))))
              (local.set $e (v128.load offset=48 (local.get $q)))
              (local.set $s3 (f32x4.add (local.get $s3) (f32x4.mul (local.get $e) (local.get $u))))
              (local.set $r3 (f32x4.add (local.get $r3) (f32x4.mul (local.get $e) (local.get $v))))
              (local.set $q (i32.add (local.get $q) (i32.const 64)))
              (local.set $p (i32.add (local.get $p) (i32.const 32)))
              (br_if $inner (i32.lt_u (local.get $p) (local.get $end))))
            ;; y[t + k, o] and y[t + k, o + 1] for k = 0..3
            (local.set $at (i32.add (local.get $y)
              (i32.shl (i32.add (i32.mul (local.get $t) (local.get $nOut)) (local.get $o)) (i32.const 2))))
            (f32.store (local.get $at) (call $sum (local.get $s0)))
            (f32.store offset=4 (local.get $at) (call $sum (local.get $r0)))
            (local.set $at (i32.add (local.get $at) (local.get $step)))
            (f32.store (local.get $at) (call $sum (local.get $s1)))
            (f32.store offset=4 (local.get $at) (call $sum (local.get $r1)))
            (local.set $at (i32.add (local.get $at) (local.get $step)))
            (f32.store (local.get $at) (call $sum (local.get $s2)))
            (f32.store offset=4 (local.get $at) (call $sum (local.get $r2)))
            (local.set $at (i32.add (local.get $at) (local.get $step)))
            (f32.store (local.get $at) (call $sum (local.get $s3)))
            (f32.store offset=4 (local.get $at) (call $sum (local.get $r3)))
            (local.set $t (i32.add (local.get $t) (i32.const 4)))
            (br $fours)))
        ;; the tokens left over, one at a time, from x itself
        (block $ones_done
          (loop $ones
            (br_if $ones_done (i32.ge_u (local.get $t) (local.get $T)))
            (local.set $q (i32.add (local.get $x) (i32.mul (local.get $t) (local.get $len))))
            (local.set $s0 (v128.const i32x4 0 0 0 0)) (local.set $r0 (v128.const i32x4 0 0 0 0))
            (local.set $p (local.get $rows))
            (loop $inner1
              (local.set $e (v128.load (local.get $q)))
              (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $e) (v128.load offset=0 (local.get $p)))))
              (local.set $r0 (f32x4.add (local.get $r0) (f32x4.mul (local.get $e) (v128.load offset=16 (local.get $p)))))
              (local.set $q (i32.add (local.get $q) (i32.const 16)))
              (local.set $p (i32.add (local.get $p) (i32.const 32)))
              (br_if $inner1 (i32.lt_u (local.get $p) (local.get $end))))
            (local.set $at (i32.add (local.get $y)
              (i32.shl (i32.add (i32.mul (local.get $t) (local.get $nOut)) (local.get $o)) (i32.const 2))))
            (f32.store (local.get $at) (call $sum (local.get $s0)))
            (f32.store offset=4 (local.get $at) (call $sum (local.get $r0)))
            (local.set $t (i32.add (local.get $t) (i32.const 1)))
            (br $ones)))
        (local.set $o (i32.add (local.get $o) (i32.const 2)))
        (br $outputs))))
)
