// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s

// The typed config of an engine, printed and parsed again: parameters at
// DeepSpeed's default are not printed, nested attributes print without
// their prefix, floats read back exactly.

// CHECK: ds.engine @model {deepspeed = #ds.engine_config<train_batch_size = 16, train_micro_batch_size_per_gpu = 4, gradient_accumulation_steps = 2, seed = 3, gradient_clipping = 0.5, optimizer = <kind = adam, lr = 0.0001234567, beta1 = 0.8, eps = 1.0e-06, weight_decay = 0.01>, scheduler = <kind = WarmupDecayLR, warmup_max_lr = 0.002, warmup_num_steps = 10, warmup_type = linear, total_num_steps = 100>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 128, stage3_param_persistence_threshold = 16, stage3_gather_16bit_weights_on_model_save = true, leaf_module = <classes = ["SparseMoeBlock"], name_suffixes = ["moe"]>>, precision = <mode = fp16, grad_accum_dtype = f32, loss_scaler = <kind = dynamic, scale = 1024.0, scale_window = 500, min_scale = 0.25>>>, module = ""}
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 16, train_micro_batch_size_per_gpu = 4, gradient_accumulation_steps = 2, seed = 3, gradient_clipping = 0.5, optimizer = <kind = adam, lr = 0.0001234567, beta1 = 0.8, eps = 1.0e-6, weight_decay = 0.01>, scheduler = <kind = WarmupDecayLR, warmup_max_lr = 0.002, warmup_num_steps = 10, warmup_type = linear, total_num_steps = 100>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 128, stage3_param_persistence_threshold = 16, stage3_gather_16bit_weights_on_model_save = true, leaf_module = <classes = ["SparseMoeBlock"], name_suffixes = ["moe"]>>, precision = <mode = fp16, grad_accum_dtype = f32, loss_scaler = <kind = dynamic, scale = 1024.0, scale_window = 500, min_scale = 0.25>>>}

// CHECK: ds.engine @student {deepspeed = #ds.engine_config<optimizer = <kind = sgd, momentum = 0.9, nesterov = true>, precision = <mode = autocast, autocast_dtype = f16, lower_precision_safe_modules = ["torch.nn.Linear"], loss_scaler = <kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>>>, module = "student"}
ds.engine @student {module = "student", deepspeed = #ds.engine_config<optimizer = <kind = sgd, momentum = 0.9, nesterov = true>, precision = <mode = autocast, autocast_dtype = f16, lower_precision_safe_modules = ["torch.nn.Linear"], loss_scaler = <kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>>>}

// A section with every parameter at its default prints as <>.
// CHECK: ds.engine @teacher {deepspeed = #ds.engine_config<zero = <>, precision = <>>, frozen, module = "teacher"}
ds.engine @teacher {module = "teacher", frozen, deepspeed = #ds.engine_config<zero = <stage = 0>, precision = <mode = fp32>>}
