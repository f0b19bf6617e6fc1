//===- Tensors.h - torch tensors across the Python boundary ----*- C++ -*-===//
//
// Tensors cross between Python's torch and the runtime as DLPack capsules:
// both sides load the same libtorch (the torch wheel's), so a capsule hands
// over the storage itself, never a copy. Each item is one capsule, made and
// unpacked by dsopt/_tensors.py.
//
//===----------------------------------------------------------------------===//

#ifndef DSOPT_TENSORS_H
#define DSOPT_TENSORS_H

#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>

#include <vector>

namespace dsopt {

/// Takes ownership of the capsule's tensor (the capsule is marked used, as
/// torch.utils.dlpack does). Throws py::value_error for a used or foreign
/// capsule.
at::Tensor tensorFromPython(pybind11::handle item);
std::vector<at::Tensor> tensorsFromPython(const pybind11::list &items);

/// A DLPack capsule sharing `tensor`'s storage; None for an undefined tensor.
pybind11::object tensorToPython(const at::Tensor &tensor);
pybind11::list tensorsToPython(const std::vector<at::Tensor> &tensors);

} // namespace dsopt

#endif // DSOPT_TENSORS_H
