// Package quant reads quantized checkpoints as the models they encode: it
// finds the quantization scheme in the files beside a checkpoint (Find),
// joins the stored tensors into logical weights (Plan), and computes any
// range of a logical weight's float32 values from the stored parts
// (Weight.Dequantize). It imports only the standard library, dtype and
// index: no file system, view or backing; the caller supplies the bytes.
//
// # Schemes
//
// One file per scheme holds its planner and its kernel, and says the
// formula and the reference code it follows; schemes.go is the table
// (configuration method → planner):
//
//	method (Config.Method)  Result.Scheme        file
//	fp8                     fp8-block|fp8-tensor fp8.go     (DeepSeek-V3/R1, Qwen3-FP8, V4's X.scale E8M0)
//	                        |mxfp8                          (weight_format mxfp8: E8M0/U8 scale per 1×32)
//	fbgemm_fp8              fp8-channel          fp8.go     (Llama 4 incl. experts)
//	compressed-tensors      fp8-*, int8-*,       fp8.go, packed.go, nvfp4.go, ctgroups.go
//	                        intN-packed, nvfp4,  (float-, int-, pack-, nvfp4-pack-quantized;
//	                        compressed-mixed     each config group by its targets and ignore)
//	mxfp4                   mxfp4                mxfp4.go   (gpt-oss, transposed as transformers does)
//	modelopt                nvfp4|fp8-tensor     nvfp4.go   (hf_quant_config.json)
//	                                             nvfp4moe.go (fused experts, scale_2 per expert or half)
//	awq                     awq|awq-gemv|        awq.go     (GEMM)
//	                        awq-gemv_fast        awqgemv.go (version gemv, gemv_fast)
//	gptq                    gptq|gptq-v2|        gptq.go    (g_idx, desc_act; 2/4/8 bits;
//	                        gptq-marlin                     3 bits: gptq3.go; checkpoint_format
//	                                             gptqmarlin.go marlin: B and s, Marlin's permutations)
//	bitsandbytes            bnb-nf4|bnb-fp4|     bnb.go     (4-bit with and without double quant;
//	                        bnb-int8                        8-bit LLM.int8, SCB per row)
//	mlx                     mlx-affine|mlx-mxfp4 mlx.go     (affine 2/3/4/5/6/8 bits, per-module overrides;
//	                        |mlx-nvfp4|mlx-mxfp8            modes mxfp4, nvfp4, mxfp8)
//	torchao                 torchao              torchao.go (safetensors __metadata__: Float8Tensor, Int4Tensor,
//	                                             torchao_fp.go IntxUnpackedToInt8Tensor, Int8Tensor, NVFP4Tensor,
//	                                                        MXTensor; kernel packings named; WithTorchAO)
//	auto-round              gptq|gptq-v2|awq     autoround.go (packing_format auto_round[:auto_gptq|:gptqmodel],
//	(intel/auto-round)                                      auto_round:auto_awq; others named)
//	hqq                     hqq                  hqq.go     (axis 1; 8/4/3/2/1 bits; meta as tensors)
//	fp_quant                fp-quant-mxfp4       fpquant.go (FP-Quant/Quartet: W = Q·Hᵀ per group where exact:
//	                                                        mxfp4, group 32, global scale 1; the rest named)
//
// Without a configuration only the unambiguous pairs are joined: X.weight
// F8_E4M3 with X.weight_scale_inv (blocks of 128×128) and P_blocks U8 with
// P_scales U8 (MXFP4); and a torchao checkpoint's parts, which its own
// safetensors __metadata__ names (WithTorchAO). Nothing else is guessed.
//
// # Cross-checks
//
// The shared fixtures' EXPECTED.json, which these tests match bit for bit,
// agrees with torch 2.14's own dequantizers for block FP8 (F32 and BF16
// scales, float32 and bfloat16 targets), MXFP4 (transposed) and
// compressed-tensors' per-channel FP8 (xcheck_quant.py in the sid chroot:
// 12 of 12 agree, 2026-11-28). The generated variants (variants_test.go)
// follow each reference's formula as read, written out per element; so do
// the torchao cases (torchao_test.go), which no torchao install has
// checked.
//
// # Invariants
//
//   - Never silently wrong. A weight whose part is missing, of the wrong
//     dtype or shape, or whose configuration is not understood, is not a
//     Weight: it is a Problem (its name and one line why), and its stored
//     tensors are in Hidden, so that the converted views list neither a
//     wrong weight nor its raw codes. A scheme that cannot be applied at
//     all (a method tensorfs does not know; a checkpoint-wide parameter
//     it cannot use: weight_block_size, weight_format, checkpoint_format,
//     quant_algo, format, config_groups, load_in_8bit) leaves every
//     weight the tensors show out, each a Problem saying why, its parts
//     hidden (refuseAll); "(checkpoint)" is the Problem only where no
//     weight shows. Each parameter a scheme reads is checked before use
//     (TestUnusableParams). A fault found only when reading (a g_idx
//     value outside its groups, a weight_shape that contradicts the
//     packed shape) is an error from Dequantize, never a value.
//   - Bit-exact. Each value is the reference's float32 computation, one
//     IEEE operation at a time in the reference's order (explicit float32
//     conversions stop Go from fusing a multiply and an add); where a
//     kernel uses a table of a group's values, each entry is made by the
//     same operations, and the lookups of whole groups (dtype.Lookup4,
//     Lookup4Hi, Lookup4At, Plane4: AVX2 on amd64) only move those
//     values; dtype.Lookup8 (FP8, int8) does the loop's one multiplication
//     with the same operand order; dtype.AffineI8BF16 and AffineNibbleBF16
//     (torchao's bf16 affine classes, HQQ 4-bit bf16) do the table's
//     operations, bf16(bf16(q − z)·s), per element; GEMV-fast's f16 tables
//     are rounded by dtype's F32→F16 converter where the sum is a float32
//     (TestFmaTables). useLookup off, every kernel takes its
//     per-element loop: TestPlainLoops checks both. Rounding to bf16/f16
//     is the caller's (dtype's converters). The shared fixtures (../shared/testdata/quant) and the
//     generated variants (variants_test.go) are checked by sha256 / bit.
//   - Bounded memory. Dequantize works in tiles of at most 1<<20 logical
//     elements that are whole rows or part of one row, so its scratch is
//     bounded by min(len(dst), 1<<20) elements' packed bytes, never by the
//     weight's size or a size the input claims (groups named by g_idx are
//     gathered by distinct group). Any sub-range gives the same values as
//     the same elements of a whole read.
//   - Reads stay inside parts: read(k, off, p) is only asked for bytes
//     within part k's stored row-major size (FuzzPlan checks it).
//   - Plan reads no tensor data, except small tensors (≤ MaxSmall bytes)
//     through its small argument: bitsandbytes' quant_state JSON and
//     compressed-tensors' weight_shape, HQQ's meta (nbits, shape, packing...).
//     Without small, bitsandbytes and HQQ weights are Problems and
//     weight_shape is checked on each Dequantize call.
//   - With a configuration, the KV-cache and activation scales of
//     attention (X.k_scale, X.v_scale, X.q_scale, X.kv_scale,
//     X.prob_scale; one float each) are hidden too: they are no weight of
//     the unquantized model.
//   - Find decodes only the quantization objects (quantization_config,
//     quantization; at most MaxObject bytes each): the rest of a
//     config.json is stepped over, never built into values.
//   - Stable output: Weights sorted by Name, Hidden and Problems sorted;
//     Parts in the order Dequantize's read indexes them. A logical weight
//     that keeps a stored name (X.weight of block FP8, MLX, bitsandbytes)
//     is not in Hidden: the logical one replaces it in the views.
package quant
