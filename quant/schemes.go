package quant

// schemes is the table of quantization methods: the configuration's
// method (Config.Method) → the planner that joins its parts into weights
// (each planner's file holds its kernel and says the formula and the
// reference it follows). A checkpoint without a configuration is planned
// by planPairs (fp8.go): only the unambiguous pairs.
var schemes = []struct {
	method string // Config.Method
	name   string // Result.Scheme (a planner may refine it)
	plan   func(*planner)
}{
	{"fp8", "fp8-block", planFP8Block},                   // fp8.go
	{"fbgemm_fp8", "fp8-channel", planFbgemm},            // fp8.go
	{"compressed-tensors", "compressed", planCompressed}, // packed.go (float-quantized: fp8.go; nvfp4: nvfp4.go)
	{"mxfp4", "mxfp4", planMXFP4},                        // mxfp4.go
	{"modelopt", "nvfp4", planModelOpt},                  // nvfp4.go
	{"awq", "awq", planAWQ},                              // awq.go
	{"gptq", "gptq", planGPTQ},                           // gptq.go
	{"bitsandbytes", "bnb-nf4", planBnb},                 // bnb.go
	{"mlx", mlxScheme, planMLX},                          // mlx.go
	{"torchao", "torchao", planTorchAO},                  // torchao.go (the safetensors __metadata__: WithTorchAO)
	{"auto-round", "gptq", planAutoRound},                // autoround.go
	{"intel/auto-round", "gptq", planAutoRound},          // autoround.go
	{"hqq", "hqq", planHQQ},                              // hqq.go
	{"fp_quant", "fp-quant", planFPQuant},                // fpquant.go (mxfp4 with group 32: Q·Hᵀ; the rest named)
}
