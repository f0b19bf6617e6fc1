// RUN: ds-opt %s -split-input-file -verify-diagnostics

// The verifiers of the typed config attributes (a nested attribute that
// fails its verifier also fails the parse of the attribute holding it).

// expected-error @+2 {{ZeRO stage must be 0, 1, 2 or 3, got 4}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<zero = <stage = 4>>}

// -----

// expected-error @+2 {{'reduce_bucket_size' must be >= 0, got -1}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<zero = <reduce_bucket_size = -1>>}

// -----

// expected-error @+2 {{an fp16 or fp16 autocast engine needs a 'loss_scaler'}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<precision = <mode = fp16>>}

// -----

// expected-error @+2 {{'loss_scaler' is only for precision fp16 and f16 autocast (bf16 needs no loss scaling), but the mode is bf16}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<precision = <mode = bf16, loss_scaler = <kind = dynamic>>>}

// -----

// expected-error @+2 {{an f16 autocast engine's loss scaler must have kind grad_scaler (DeepSpeed scales fp16 autocast with a torch.amp.GradScaler)}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<precision = <mode = autocast, autocast_dtype = f16, loss_scaler = <kind = dynamic>>>}

// -----

// expected-error @+2 {{precision autocast needs an 'autocast_dtype'}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<precision = <mode = autocast>>}

// -----

// expected-error @+2 {{'autocast_dtype' must be bf16 or f16, got 'f32'}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<precision = <mode = autocast, autocast_dtype = f32>>}

// -----

// expected-error @+2 {{'grad_accum_dtype' must be f32, f16 or bf16, got 'i32'}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<precision = <mode = bf16, grad_accum_dtype = i32>>}

// -----

// expected-error @+2 {{'lower_precision_safe_modules' is only for precision autocast, but the mode is fp32}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<precision = <lower_precision_safe_modules = ["torch.nn.Linear"]>>}

// -----

// expected-error @+2 {{optimizer 'beta2' must be in [0, 1), got 1}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw, beta2 = 1.0>>}

// -----

// expected-error @+2 {{scheduler WarmupCosineLR needs 'total_num_steps'}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<scheduler = <kind = WarmupCosineLR>>}

// -----

// expected-error @+1 {{train_batch_size 6 is not train_micro_batch_size_per_gpu (4) x gradient_accumulation_steps (1) x the world size}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 6, train_micro_batch_size_per_gpu = 4>}

// -----

// expected-error @+2 {{'classes' must hold strings, got 1}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<zero = <leaf_module = <classes = [1]>>>}

// -----

// expected-error @+2 {{loss scaler 'scale' must be > 0, got 0}}
// expected-error @+1 {{failed to parse DS_}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<precision = <mode = fp16, loss_scaler = <kind = static, scale = 0.0>>>}
