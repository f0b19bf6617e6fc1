// RUN: ds-opt %s -split-input-file -verify-diagnostics

// What the verifiers of ds.rng_state_get and ds.rng_state_set reject: a
// type other than the CPU generator's state, and a state that no
// ds.rng_state_get saved.


func.func @wrong_size() {
  // expected-error@+1 {{'ds.rng_state_get' op expects the CPU generator's state, 'tensor<5056xui8>', got 'tensor<16xui8>'}}
  %s = ds.rng_state_get : tensor<16xui8>
  return
}

// -----

func.func @dynamic_size(%s: tensor<?xui8>) {
  // expected-error@+1 {{'ds.rng_state_set' op expects the CPU generator's state, 'tensor<5056xui8>', got 'tensor<?xui8>'}}
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
