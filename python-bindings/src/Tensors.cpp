//===- Tensors.cpp - torch tensors across the Python boundary -------------===//

#include "Tensors.h"

#include <ATen/DLConvertor.h>

namespace py = pybind11;

namespace dsopt {

namespace {

constexpr const char *kCapsuleName = "dltensor";
constexpr const char *kUsedCapsuleName = "used_dltensor";

/// A capsule nobody consumed still owns its tensor (the DLPack protocol's
/// rule); one that was consumed was renamed and owns nothing.
void deleteUnusedCapsule(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName))
    return;
  auto *managed = static_cast<DLManagedTensor *>(
      PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed && managed->deleter)
    managed->deleter(managed);
}

} // namespace

at::Tensor tensorFromPython(py::handle item) {
  PyObject *capsule = item.ptr();
  if (!PyCapsule_IsValid(capsule, kCapsuleName))
    throw py::value_error("expected an unused DLPack capsule ('dltensor')");
  auto *managed = static_cast<DLManagedTensor *>(
      PyCapsule_GetPointer(capsule, kCapsuleName));
  at::Tensor tensor = at::fromDLPack(managed);
  // From here the tensor's deleter owns `managed`.
  PyCapsule_SetName(capsule, kUsedCapsuleName);
  return tensor;
}

std::vector<at::Tensor> tensorsFromPython(const py::list &items) {
  std::vector<at::Tensor> tensors;
  tensors.reserve(items.size());
  for (py::handle item : items)
    tensors.push_back(tensorFromPython(item));
  return tensors;
}

py::object tensorToPython(const at::Tensor &tensor) {
  if (!tensor.defined())
    return py::none();
  DLManagedTensor *managed = at::toDLPack(tensor);
  PyObject *capsule = PyCapsule_New(managed, kCapsuleName, deleteUnusedCapsule);
  if (!capsule) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

py::list tensorsToPython(const std::vector<at::Tensor> &tensors) {
  py::list items;
  for (const at::Tensor &tensor : tensors)
    items.append(tensorToPython(tensor));
  return items;
}

} // namespace dsopt
