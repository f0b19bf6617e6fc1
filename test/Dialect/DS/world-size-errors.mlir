// RUN: ds-opt %s -split-input-file -verify-diagnostics

// The world size is the module's: an i64 >= 1.
module attributes {ds.world_size = 4 : i64} {
}

// -----

// expected-error @below {{'ds.world_size' must be >= 1, got 0}}
module attributes {ds.world_size = 0 : i64} {
}

// -----

// expected-error @below {{'ds.world_size' must be an i64, got 2 : i32}}
module attributes {ds.world_size = 2 : i32} {
}

// -----

// expected-error @below {{'ds.world_size' must be an i64, got "2"}}
module attributes {ds.world_size = "2"} {
}

// -----

module {
  // expected-error @below {{'ds.world_size' is an attribute of builtin.module (the ranks the module is compiled for), not of 'func.func'}}
  func.func @f() attributes {ds.world_size = 2 : i64} {
    return
  }
}
