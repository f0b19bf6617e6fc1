#===- DSPrecompiledHeaders.cmake - Precompiled LibTorch and MLIR headers ---===#
#
# Parsing <ATen/ATen.h> costs about 18 s of one core, <torch/torch.h> 33 s,
# before a line of the project's own code is compiled; the build has about 120
# such translation units. Each target below parses its headers once into a
# precompiled header that its files load in about a second (docs/building.md).
#
#   ds_precompile_headers(TARGET HEADER...)
#     HEADER as in target_precompile_headers, in angle brackets
#     ("<ATen/ATen.h>", "<ds/Dialect/DS/IR/DSOps.h>": found on the include
#     path; a quoted name is a file beside the target's sources). Only for
#     targets with several files that include these headers: a precompiled
#     header costs about as much as two of their files, and is hundreds of MB
#     on disk.
#
# -DDS_PRECOMPILED_HEADERS=OFF turns them off (every file then parses its own
# headers, as a compiler without precompiled headers would).
#
#===----------------------------------------------------------------------===#

option(DS_PRECOMPILED_HEADERS
  "Precompile the LibTorch and MLIR headers of the heaviest targets" ON)

function(ds_precompile_headers target)
  if(DS_PRECOMPILED_HEADERS)
    target_precompile_headers(${target} PRIVATE ${ARGN})
  endif()
endfunction()
