//===- DSTypes.td - ds dialect types -----------------------*- tablegen -*-===//

#ifndef DS_DIALECT_DS_IR_DSTYPES_TD
#define DS_DIALECT_DS_IR_DSTYPES_TD

include "ds/Dialect/DS/IR/DSDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypes.td"

class DS_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<DS_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def DS_NoneType : DS_Type<"None", "none"> {
  let summary = "TorchScript's None";
  let description = [{
    The value of an optional argument left out (`bias=None`, `dtype=None`).
  }];
}

def DS_StrType : DS_Type<"Str", "str"> {
  let summary = "a TorchScript string";
  let description = [{
    String arguments such as `approximate="none"` of `aten::gelu`, reductions
    and devices.
  }];
}

def DS_DeviceType : DS_Type<"Device", "device"> {
  let summary = "a TorchScript device";
  let description = [{
    Device arguments (`device=x.device`); constants are written as strings:
    `ds.constant "cpu" : !ds.device`.
  }];
}

def DS_ListType : DS_Type<"List", "list"> {
  let summary = "a TorchScript list";
  let description = [{
    A list of values of one kind, as `int[]` and `Tensor[]` arguments and the
    results of `aten::split` / `aten::chunk`. For tensor lists the element type
    is a tensor type that only fixes the kind: elements may have any shape and
    element type (`!ds.list<tensor<*xf32>>`).
  }];
  let parameters = (ins "::mlir::Type":$elementType);
  let assemblyFormat = "`<` $elementType `>`";
}

def DS_TokenType : DS_Type<"Token", "token"> {
  let summary = "completion token of an asynchronous collective";
  let description = [{
    Returned by the asynchronous forms of the collectives and consumed by
    `ds.wait`.
  }];
}

def DS_ScalarType : AnyTypeOf<[I64, F64, I1], "TorchScript scalar (i64, f64, i1)">;
def DS_AnyValue : AnyTypeOf<[AnyTensor, I64, F64, I1, DS_NoneType, DS_StrType,
                             DS_DeviceType, DS_ListType], "TorchScript value">;

#endif // DS_DIALECT_DS_IR_DSTYPES_TD
