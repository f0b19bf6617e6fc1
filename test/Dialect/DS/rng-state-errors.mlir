// RUN: ds-opt %s -split-input-file -verify-diagnostics

// What the verifiers of ds.rng_state_get and ds.rng_state_set reject: a
// type other than the state of the target device's generator (CPU without
// ds.target_device, 5056 bytes; CUDA, 16 bytes), a state that no
// ds.rng_state_get saved, and a target device that is neither.


func.func @wrong_size() {
  // expected-error@+1 {{'ds.rng_state_get' op expects the CPU generator's state, 'tensor<5056xui8>', for the module's target device "cpu" (ds.target_device), got 'tensor<16xui8>'}}
  %s = ds.rng_state_get : tensor<16xui8>
  return
}

// -----

func.func @dynamic_size(%s: tensor<?xui8>) {
  // expected-error@+1 {{'ds.rng_state_set' op expects the CPU generator's state, 'tensor<5056xui8>', for the module's target device "cpu" (ds.target_device), got 'tensor<?xui8>'}}
  ds.rng_state_set %s : tensor<?xui8>
  return
}

// -----

func.func @not_saved(%s: tensor<5056xui8>) {
  // expected-error@+1 {{'ds.rng_state_set' op expects a state saved by ds.rng_state_get}}
  ds.rng_state_set %s : tensor<5056xui8>
  return
}

// -----

func.func @signed_bytes() {
  // expected-error@+1 {{'ds.rng_state_get' op result #0 must be 1D tensor of 8-bit unsigned integer values, but got 'tensor<5056xi8>'}}
  %s = ds.rng_state_get : tensor<5056xi8>
  return
}

// -----

module attributes {ds.target_device = "cuda"} {
  func.func @cpu_state_for_cuda() {
    // expected-error@+1 {{'ds.rng_state_get' op expects the CUDA generator's state, 'tensor<16xui8>', for the module's target device "cuda" (ds.target_device), got 'tensor<5056xui8>'}}
    %s = ds.rng_state_get : tensor<5056xui8>
    return
  }
}

// -----

module attributes {ds.target_device = "cpu"} {
  func.func @cuda_state_for_cpu(%s: tensor<16xui8>) {
    // expected-error@+1 {{'ds.rng_state_set' op expects the CPU generator's state, 'tensor<5056xui8>', for the module's target device "cpu" (ds.target_device), got 'tensor<16xui8>'}}
    ds.rng_state_set %s : tensor<16xui8>
    return
  }
}

// -----

// expected-error@+1 {{'ds.target_device' must be "cpu" or "cuda", got "tpu"}}
module attributes {ds.target_device = "tpu"} {
}

// -----

func.func @not_a_module() attributes {ds.target_device = "cuda"} {
  // expected-error@-1 {{'ds.target_device' is an attribute of builtin.module (the device the module is compiled for), not of 'func.func'}}
  return
}
