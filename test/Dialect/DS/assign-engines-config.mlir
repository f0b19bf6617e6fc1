// RUN: split-file %s %t
// RUN: ds-opt %t/model.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/plain.json})' | FileCheck %s --check-prefix=PLAIN
// RUN: ds-opt %t/model.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/engines.json world-size=2})' | FileCheck %s --check-prefix=ENGINES
// RUN: ds-opt %t/model.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/precision.json})' | FileCheck %s --check-prefix=PRECISION

// -ds-assign-engines with a DeepSpeed config: the config's engines, each
// with its config typed (`deepspeed`, what the passes read; DeepSpeed's
// defaults are not printed) and as given with "auto" resolved (`config`,
// provenance for the plan).

// "auto" resolves from the data: the first batched argument of
// @forward_eval has 8 rows.
// PLAIN:      module attributes {ds.target_device = "cpu"} {
// PLAIN-NEXT:   ds.engine @model {config = "{\22train_micro_batch_size_per_gpu\22:8,\22gradient_accumulation_steps\22:2,\22seed\22:7,\22optimizer\22:{\22type\22:\22Adam\22,\22params\22:{\22lr\22:0.002,\22adam_w_mode\22:false}},\22scheduler\22:{\22type\22:\22WarmupLR\22,\22params\22:{\22warmup_num_steps\22:3}},\22zero_optimization\22:{\22stage\22:3,\22leaf_module\22:{\22names\22:[\22student\22]}}}", deepspeed = #ds.engine_config<train_batch_size = 16, train_micro_batch_size_per_gpu = 8, gradient_accumulation_steps = 2, seed = 7, optimizer = <kind = adam, lr = 0.002>, scheduler = <kind = WarmupLR, warmup_num_steps = 3>, zero = <stage = 3, overlap_comm = true, leaf_module = <names = ["student"]>>>, module = ""}
// PLAIN:        ds.param @student.w : tensor<4xf32> {engine = @model,

// The "engines" form: one engine per key, frozen without an optimizer; the
// module's world size becomes 2.
// ENGINES:      module attributes {ds.target_device = "cpu", ds.world_size = 2 : i64} {
// ENGINES-NEXT:   ds.engine @student {config = {{.*}}, deepspeed = #ds.engine_config<train_batch_size = 16, train_micro_batch_size_per_gpu = 8, optimizer = <kind = adamw>, zero = <stage = 2>>, module = "student"}
// ENGINES-NEXT:   ds.engine @teacher {config = {{.*}}, deepspeed = #ds.engine_config<train_batch_size = 16, train_micro_batch_size_per_gpu = 8>, frozen, module = "teacher"}
// ENGINES-NEXT:   ds.param @student.w : tensor<4xf32> {engine = @student,
// ENGINES-NEXT:   ds.param @teacher.w : tensor<4xf32> {engine = @teacher,

// Precision: the mode, the dtypes as given, the resolved loss scaler.
// PRECISION: ds.engine @model {config = {{.*}}, deepspeed = #ds.engine_config<train_batch_size = 8, train_micro_batch_size_per_gpu = 8, optimizer = <kind = adamw>, precision = <mode = fp16, communication_data_type = f32, loss_scaler = <kind = static, scale = 128.0>>>, module = ""}

//--- model.mlir
ds.param @student.w : tensor<4xf32> {module = "student", module_class = "M", requires_grad}
ds.param @teacher.w : tensor<4xf32> {module = "teacher", module_class = "M", requires_grad}
func.func @forward_eval(%mask: tensor<3xf32> {ds.unbatched}, %x: tensor<8x4xf32>) {
  return
}
//--- plain.json
{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2, "seed": 7,
 "optimizer": {"type": "Adam", "params": {"lr": 0.002, "adam_w_mode": false}},
 "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 3}},
 "zero_optimization": {"stage": 3, "leaf_module": {"names": ["student"]}}}
//--- engines.json
{"engines": {"student": {"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 2}},
             "teacher": {"train_micro_batch_size_per_gpu": "auto"}}}
//--- precision.json
{"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW"},
 "fp16": {"enabled": true, "loss_scale": 128}, "communication_data_type": "fp32"}
