// RUN: split-file %s %t
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/bf16-autocast.json})' 2>&1 | FileCheck %s --check-prefix=BF16-AUTOCAST
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/fp16-autocast.json})' 2>&1 | FileCheck %s --check-prefix=FP16-AUTOCAST
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/autocast-f32.json})' 2>&1 | FileCheck %s --check-prefix=AUTOCAST-F32
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/bf16-fp16.json})' 2>&1 | FileCheck %s --check-prefix=BF16-FP16
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/lr.json})' 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/unknown-key.json})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN-KEY
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/lamb.json})' 2>&1 | FileCheck %s --check-prefix=LAMB
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/decay.json})' 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/clipping.json})' 2>&1 | FileCheck %s --check-prefix=CLIPPING
// RUN: not ds-opt %t/world2.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/batch.json})' 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/auto.json})' 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/array.json})' 2>&1 | FileCheck %s --check-prefix=ARRAY
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/stages.json})' 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not ds-opt %t/world2.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/stages.json world-size=4})' 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not ds-opt %t/empty.mlir --pass-pipeline='builtin.module(ds-assign-engines{config=%t/stages.json engines=a=})' 2>&1 | FileCheck %s --check-prefix=BOTH

// -ds-assign-engines parses the DeepSpeed config, where it enters the IR:
// what the config library rejects is an error naming the file and the key.

// BF16-AUTOCAST: error: {{.*}}bf16-autocast.json: torch_autocast.enabled: torch_autocast.enabled cannot be true together with bf16.enabled
// FP16-AUTOCAST: error: {{.*}}fp16-autocast.json: torch_autocast.enabled: torch_autocast.enabled cannot be true together with fp16.enabled
// AUTOCAST-F32: error: {{.*}}autocast-f32.json: torch_autocast.dtype: autocast needs a lower-precision dtype (bfloat16 or float16), got float32
// BF16-FP16: error: {{.*}}bf16-fp16.json: bf16.enabled: fp16 and bf16 cannot both be enabled
// LR: error: {{.*}}lr.json: optimizer.params.lr: must be >= 0.0, got -1.0
// UNKNOWN-KEY: error: {{.*}}unknown-key.json: optimizer.params.learning_rate: unknown key for optimizer AdamW (see docs/config.md for the keys we accept)
// LAMB: error: {{.*}}lamb.json: optimizer.type: optimizer "Lamb" is not supported (supported: Adam, AdamW, SGD)
// DECAY: error: {{.*}}decay.json: scheduler.params.total_num_steps: missing: required by WarmupDecayLR
// CLIPPING: error: {{.*}}clipping.json: gradient_clipping: must be >= 0.0, got -1.0
// Batch sizes are checked against the module's world size.
// BATCH: error: {{.*}}batch.json: train_batch_size: inconsistent batch sizes: train_batch_size (6) != train_micro_batch_size_per_gpu (2) * gradient_accumulation_steps (1) * world size (2)
// "auto" needs data to resolve from.
// AUTO: error: {{.*}}auto.json: train_micro_batch_size_per_gpu: "auto" needs the global micro-batch B of the data, which was not given
// ARRAY: error: {{.*}}array.json: expected an object, found array
// STAGES: error: {{.*}}stages.json: zero_optimization.stages: unknown key
// WORLD: error: world-size=4 disagrees with the module's ds.world_size = 2 (the size the model was imported for)
// BOTH: error: ds-assign-engines takes the engines from the config; do not give `engines` or `frozen` with it

//--- empty.mlir
module {}
//--- world2.mlir
module attributes {ds.world_size = 2 : i64} {}
//--- bf16-autocast.json
{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "torch_autocast": {"enabled": true}, "optimizer": {"type": "AdamW"}}
//--- fp16-autocast.json
{"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": true}, "torch_autocast": {"enabled": true}, "optimizer": {"type": "AdamW"}}
//--- autocast-f32.json
{"train_micro_batch_size_per_gpu": 1, "torch_autocast": {"enabled": true, "dtype": "float32"}, "optimizer": {"type": "AdamW"}}
//--- bf16-fp16.json
{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "fp16": {"enabled": true}, "optimizer": {"type": "AdamW"}}
//--- lr.json
{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "Adam", "params": {"lr": -1}}}
//--- unknown-key.json
{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW", "params": {"learning_rate": 0.1}}}
//--- lamb.json
{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "Lamb"}}
//--- decay.json
{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW"}, "scheduler": {"type": "WarmupDecayLR"}}
//--- clipping.json
{"train_micro_batch_size_per_gpu": 1, "gradient_clipping": -1, "optimizer": {"type": "Adam"}}
//--- batch.json
{"train_batch_size": 6, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "optimizer": {"type": "Adam"}}
//--- auto.json
{"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "Adam"}}
//--- array.json
[1, 2]
//--- stages.json
{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW"}, "zero_optimization": {"stages": 1}}
