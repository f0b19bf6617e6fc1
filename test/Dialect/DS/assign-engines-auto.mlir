// RUN: split-file %s %t
// RUN: ds-opt %t/model.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/engines.json})' 2>&1 | FileCheck %s --check-prefix=HIDDEN
// RUN: ds-opt %t/model.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/trainer.json mixed-precision=fp16 set=optimizer.params.lr=0.01,engines.head.gradient_clipping=0.25})' 2>&1 | FileCheck %s --check-prefix=OPTIONS
// RUN: not ds-opt %t/model.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/trainer.json mixed-precision=yes})' 2>&1 | FileCheck %s --check-prefix=BAD-MIXED
// RUN: not ds-opt %t/model.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/trainer.json set=engines.tail.seed=1})' 2>&1 | FileCheck %s --check-prefix=BAD-SET
// RUN: not ds-opt %t/flat.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/flat.json})' 2>&1 | FileCheck %s --check-prefix=NO-HIDDEN

// -ds-assign-engines resolves "auto" bucket sizes with each engine's own
// hidden size: the most common last dimension of the 2-D parameters it owns
// (the root engine "" owns what "head" does not). Its config records the
// values; each is a remark at the config file.
// HIDDEN: remark: {{.*}}engines.json: engines.head.zero_optimization.reduce_bucket_size: "auto" = 36 (h*h with the hidden size h = 6, the most common last dimension of the engine's 2-D parameters (2 of 3), as the HF Trainer fills it)
// HIDDEN: remark: {{.*}}engines.json: engines[""].zero_optimization.reduce_bucket_size: "auto" = 16 (h*h with the hidden size h = 4, the most common last dimension of the engine's 2-D parameters (2 of 2), as the HF Trainer fills it)
// HIDDEN: ds.engine @head {config = "{{.*}}\22reduce_bucket_size\22:36{{.*}}", deepspeed = #ds.engine_config<{{.*}}zero = <stage = 2, reduce_bucket_size = 36>>, module = "head"}
// HIDDEN: ds.engine @root {config = "{{.*}}\22reduce_bucket_size\22:16{{.*}}", deepspeed = #ds.engine_config<{{.*}}zero = <stage = 2, reduce_bucket_size = 16>>, module = ""}

// The pass's own mixed-precision and set options (ds-compile's
// --mixed-precision and --set): what they resolve is a remark, not a
// warning.
// OPTIONS-NOT: warning:
// OPTIONS: remark: {{.*}}trainer.json: engines.head.optimizer.params.lr: 0.01 from --set optimizer.params.lr=0.01
// OPTIONS: remark: {{.*}}trainer.json: engines.head.gradient_clipping: 0.25 from --set engines.head.gradient_clipping=0.25
// OPTIONS: remark: {{.*}}trainer.json: engines.head.fp16.enabled: "auto" = true (--mixed-precision fp16)
// OPTIONS: ds.engine @head {config = "{{.*}}\22gradient_clipping\22:0.25}", deepspeed = #ds.engine_config<{{.*}}gradient_clipping = 0.25, optimizer = <kind = adamw, lr = 0.01>, precision = <mode = fp16
// OPTIONS: ds.engine @root {{.*}}optimizer = <kind = adamw, lr = 0.01

// BAD-MIXED: error: --mixed-precision yes: expected bf16, fp16 or no
// BAD-SET: error: {{.*}}trainer.json: --set engines.tail.seed=1: "tail" is not an engine of the config (engines: "head", "")

// Without a 2-D parameter there is no hidden size to resolve from.
// NO-HIDDEN: error: {{.*}}flat.json: zero_optimization.reduce_bucket_size: "auto" needs the model's hidden size, which was not given; give a value

//--- model.mlir
ds.param @head.proj.weight : tensor<6x6xf32> {module = "head.proj", module_class = "Linear", requires_grad}
ds.param @head.out.weight : tensor<2x6xf32> {module = "head.out", module_class = "Linear", requires_grad}
ds.param @head.gate.weight : tensor<6x2xf32> {module = "head.gate", module_class = "Linear", requires_grad}
ds.param @body.fc1.weight : tensor<8x4xf32> {module = "body.fc1", module_class = "Linear", requires_grad}
ds.param @body.fc2.weight : tensor<3x4xf32> {module = "body.fc2", module_class = "Linear", requires_grad}
ds.param @body.fc2.bias : tensor<3xf32> {module = "body.fc2", module_class = "Linear", requires_grad}
func.func @forward_eval(%x: tensor<8x4xf32>) {
  return
}
//--- engines.json
{"engines": {"head": {"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}},
             "": {"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}}}}
//--- trainer.json
{"engines": {"head": {"train_micro_batch_size_per_gpu": "auto", "fp16": {"enabled": "auto"}, "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}},
             "": {"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}}}
//--- flat.mlir
ds.param @scale : tensor<4xf32> {module = "", module_class = "M", requires_grad}
func.func @forward_eval(%x: tensor<8x4xf32>) {
  return
}
//--- flat.json
{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"reduce_bucket_size": "auto"}}
